// Package browser holds the dashboard's tests that need more than the dashboard: its pages in a
// real Chromium (chromedp), and the processes' pages with real providers. It is a module of its
// own, so that chromedp and the providers' SDKs are not in the taskorch module's requirements;
// it has no code but these tests and the screenshot tool (screenshot/, which scripts/
// demo-screenshot.sh runs).
package browser
