package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/providers"
	"github.com/taskorch/taskorch/webhooks"
)

// The webhook ingress's variables (docs/configuration.md, "Delivery webhooks"). The Twilio auth
// token is the Twilio provider's, providers.EnvTwilioAuthToken.
const (
	envResendWebhookSecret = "TASKORCH_RESEND_WEBHOOK_SECRET" //nolint:gosec // the variable's name, not a credential
	envTwilioWebhookURL    = "TASKORCH_TWILIO_WEBHOOK_URL"
)

// webhookConfig reads the webhook handler's settings through getenv.
func webhookConfig(getenv func(string) string, log *slog.Logger) webhooks.Config {
	return webhooks.Config{
		ResendSecret:    getenv(envResendWebhookSecret),
		TwilioAuthToken: getenv(providers.EnvTwilioAuthToken),
		TwilioURL:       getenv(envTwilioWebhookURL),
		Logger:          log.With("component", "webhooks"),
	}
}

func newWebhooksCmd(g *globals) *cobra.Command {
	var addr, logFormat, logLevel string
	cmd := &cobra.Command{
		Use:   "webhooks",
		Short: "Serve the providers' delivery callbacks (Resend, Twilio)",
		Long: `Serves POST /webhooks/resend and POST /webhooks/twilio (docs/providers.md, "Delivery
webhooks"): a verified delivered, bounced or complained email, or a delivered, undelivered or
failed SMS, becomes a fact on the matching attempt of the comms processes and a signal keyed by
the process. Refused callbacks (unsigned, mis-signed, replayed, oversized, unknown) are recorded
in queues.error. GET /healthz answers ok.

Secrets come from the environment only: TASKORCH_RESEND_WEBHOOK_SECRET (the whsec_... signing
secret Resend shows for the endpoint) and TASKORCH_TWILIO_AUTH_TOKEN (the auth token the Twilio
provider uses). With neither set the command refuses to start. TASKORCH_TWILIO_WEBHOOK_URL is the
public URL Twilio calls, which Twilio signs: set it when a proxy or load balancer stands in front.

taskorch worker serves the same routes on TASKORCH_HTTP_ADDR. The database must hold the comms
process (taskorch migrate up --processes comms); the role needs only the worker role's grants.`,
		Example: `  TASKORCH_RESEND_WEBHOOK_SECRET=whsec_... taskorch webhooks
  TASKORCH_TWILIO_AUTH_TOKEN=... TASKORCH_TWILIO_WEBHOOK_URL=https://hooks.example.com/webhooks/twilio taskorch webhooks --addr 0.0.0.0:8081`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(os.Stderr, logFormat, logLevel)
			if err != nil {
				return err
			}
			cfg := webhookConfig(os.Getenv, log)
			if cfg.ResendSecret == "" && cfg.TwilioAuthToken == "" {
				return usageErrorf("no webhook secret: set %s, %s or both", envResendWebhookSecret, providers.EnvTwilioAuthToken)
			}
			ctx := cmd.Context()
			pool, err := g.connect(ctx)
			if err != nil {
				return err
			}
			defer pool.Close()
			h, err := webhooks.NewHandler(pool, cfg)
			if err != nil {
				return usageErrorf("%v", err)
			}
			if err := taskorch.CheckMigrations(ctx, pool, &taskorch.MigrateOpts{Processes: []string{"comms"}}); err != nil {
				return fmt.Errorf("webhooks need the comms process migrated (taskorch migrate up --processes comms): %w", redact(err))
			}
			var lc net.ListenConfig
			ln, err := lc.Listen(ctx, "tcp", addr)
			if err != nil {
				return usageErrorf("--addr %s: %v", addr, err)
			}
			mux := http.NewServeMux()
			mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
			mux.Handle("/webhooks/", h)
			srv := &http.Server{
				Handler:           mux,
				ReadHeaderTimeout: 10 * time.Second,
				ReadTimeout:       30 * time.Second,
				WriteTimeout:      30 * time.Second,
				ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
			}
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			log.Info("serving webhooks", "addr", ln.Addr().String(), "routes", h.Routes())
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "webhooks: http://%s/webhooks/\n", ln.Addr())
			select {
			case <-ctx.Done():
			case err := <-done:
				return err
			}
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(stopCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	envString := func(name, def string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return def
	}
	fl := cmd.Flags()
	fl.StringVar(&addr, "addr", envString("TASKORCH_WEBHOOKS_ADDR", "127.0.0.1:8081"), "address to listen on (host:port; port 0 picks a free one) (env TASKORCH_WEBHOOKS_ADDR)")
	fl.StringVar(&logFormat, "log-format", envString("TASKORCH_LOG_FORMAT", "text"), "text or json (env TASKORCH_LOG_FORMAT)")
	fl.StringVar(&logLevel, "log-level", envString("TASKORCH_LOG_LEVEL", "info"), "debug, info, warn or error (env TASKORCH_LOG_LEVEL)")
	return cmd
}
