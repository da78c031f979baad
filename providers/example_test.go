package providers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskorch/taskorch"
	"github.com/taskorch/taskorch/providers"
)

// A worker's channels from the environment: the email channel through Resend, SMS recorded in
// the outbox, no file_delete channel (its tasks fail with a message naming
// TASKORCH_FILES_SIGNER). Printing the configuration hides the API key.
func ExampleConfigFromEnv() {
	env := map[string]string{
		"TASKORCH_EMAIL_PROVIDER": "resend",
		"TASKORCH_RESEND_API_KEY": "re_123456789",
		"TASKORCH_EMAIL_FROM":     "Example <noreply@example.com>",
		"TASKORCH_SMS_PROVIDER":   "outbox",
	}
	cfg, err := providers.ConfigFromEnv(func(name string) string { return env[name] })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg)
	// Output: providers.Config{email_provider=resend email_from=Example <noreply@example.com> resend_api_key=[REDACTED] sms_provider=outbox}
}

// Wiring the providers into a worker (os.Getenv reads the TASKORCH_* variables).
func ExampleConfig_Channels() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	cfg, err := providers.ConfigFromEnv(os.Getenv)
	if err != nil {
		panic(err)
	}
	channels, err := cfg.Channels(pool) // the pool is for the outbox provider
	if err != nil {
		panic(err) // e.g. "TASKORCH_EMAIL_PROVIDER=resend needs TASKORCH_RESEND_API_KEY"
	}
	w, err := taskorch.NewWorker(pool, &taskorch.WorkerConfig{Channels: channels})
	if err != nil {
		panic(err)
	}
	_ = w.Run(ctx)
}

// One provider call, as the worker makes it: the request is the before handler's payload, the
// response goes to the success handler. Here Resend's API is a local stand-in.
func ExampleNewResend() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"}`))
	}))
	defer api.Close()

	resend, err := providers.NewResend(providers.ResendConfig{APIKey: "re_123", BaseURL: api.URL, From: "noreply@example.com"})
	if err != nil {
		panic(err)
	}
	resp, err := resend.Call(context.Background(), taskorch.ChannelCall{
		Request:        json.RawMessage(`{"to":"ada@example.com","subject":"Welcome","text":"Hello Ada"}`),
		IdempotencyKey: "taskorch-task-1",
	})
	fmt.Println(string(resp), err)
	// Output: {"id":"49a3999c-0ce1-4ea6-ab68-afcd6dc2e794","provider":"resend"} <nil>
}
