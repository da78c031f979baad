// Command screenshot signs in on a running dashboard with its token and saves a page as a PNG,
// with headless Chromium (chromedp):
//
//	go run ./dashboard/browser/screenshot -url http://127.0.0.1:8080/ -token TOKEN -path '/?window=15m' -out overview.png
//
// It waits until the page has rendered (-wait, a CSS selector) and takes the whole page at
// -width pixels wide. scripts/demo-screenshot.sh runs it against `taskorch dev` to make the
// README's picture of the dashboard (docs/dashboard.md, "Screenshots").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "screenshot:", err)
		os.Exit(1)
	}
}

func run() error {
	base := flag.String("url", "", "the dashboard's URL (http://127.0.0.1:PORT/)")
	token := flag.String("token", os.Getenv("TASKORCH_DASHBOARD_TOKEN"), "the dashboard's sign-in token (default $TASKORCH_DASHBOARD_TOKEN)")
	path := flag.String("path", "/", "the page to take, relative to -url")
	wait := flag.String("wait", "#content", "a CSS selector to wait for before taking the page")
	out := flag.String("out", "screenshot.png", "the PNG file to write")
	width := flag.Int("width", 1360, "the window's width in pixels")
	height := flag.Int("height", 900, "the window's height in pixels (the whole page is taken)")
	timeout := flag.Duration("timeout", time.Minute, "give up after this long")
	flag.Parse()
	if *base == "" || *token == "" {
		return errors.New("-url and -token are required")
	}
	bin, err := chromium()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "taskorch-screenshot-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(dir),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.WindowSize(*width, *height),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	root := strings.TrimSuffix(*base, "/")
	// Sign in as a person does, on the sign-in page: the session cookie then carries every request.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(root+"/login"),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), *token),
		chromedp.Submit(chromedp.CSS(`input[name=token]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action$="/logout"]`)),
	); err != nil {
		return fmt.Errorf("sign in at %s/login: %w", root, err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(root+*path), chromedp.WaitVisible(chromedp.CSS(*wait))); err != nil {
		return fmt.Errorf("open %s%s: %w", root, *path, err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("take %s%s: %w", root, *path, err)
	}
	if err := os.WriteFile(*out, png, 0o644); err != nil { //nolint:gosec // a picture for the docs
		return err
	}
	fmt.Printf("screenshot: %s%s → %s\n", root, *path, *out)
	return nil
}

// chromium finds the browser: scripts/install-deps.sh installs it (apt-get install chromium).
func chromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium found: run scripts/install-deps.sh as root (apt-get install chromium)")
}
