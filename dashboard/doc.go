/*
Package dashboard is taskorch's web dashboard: an http.Handler that shows every task, lease,
event, error, process, worker, schedule and outbox message in a database, and lets an
authenticated operator retry and cancel tasks and pause and resume queues.

Mount it in your own mux:

	dash, err := dashboard.New(pool, dashboard.Config{
		Prefix: "/taskorch",
		Token:  os.Getenv("TASKORCH_DASHBOARD_TOKEN"),
	})
	if err != nil { ... }
	mux.Handle("/taskorch/", dash)

or run it with `taskorch dashboard` (docs/dashboard.md).

Pages are rendered on the server with html/template (every value is escaped: a payload holding
<script> shows as text), charts are SVG drawn by the server, and a little embedded JavaScript
refreshes each page's content every few seconds without reloading. There is no build step and
nothing is fetched from elsewhere.

# Security

Every state-changing request (POST) needs authentication — Config.Token as a bearer token or a
session cookie made by signing in with it on /login, or Config.Username and Config.Password as
HTTP basic auth — and a CSRF token bound to a SameSite=Strict cookie. Pages need authentication
too unless Config.PublicRead is set. Signing out revokes the session in the database, for every
dashboard process sharing Config.SecretKey. Config.ReadOnly refuses every action. Responses
carry a Content-Security-Policy without inline scripts, frame-ancestors 'none', X-Frame-Options
and nosniff. No page shows a password: the database is named by user, host, port and database,
and payloads and messages are masked by the rule of docs/security.md (secret keys at any depth,
URL passwords, key=value secrets).
*/
package dashboard
