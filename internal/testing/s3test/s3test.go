// Package s3test starts a real S3-compatible gateway for tests: versitygw with a posix backend
// in a temporary directory, on 127.0.0.1, with known root credentials. It checks request
// signatures as S3 does, so a tampered presigned URL is refused.
//
//	gw := s3test.Start(t)
//	gw.CreateBucket(t, "files")
//	gw.PutObject(t, "files", "a/b.txt", "hello")
//
// versitygw is installed by scripts/install-deps.sh
// (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0); a test that needs it fails,
// never skips, when it is missing.
package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// The gateway's root credentials and region.
const (
	AccessKeyID     = "taskorchtestkey"
	SecretAccessKey = "taskorch-test-secret-3fa9c1" //nolint:gosec // a throwaway test gateway's credentials
	Region          = "us-east-1"
)

// Gateway is a running versitygw.
type Gateway struct {
	// Endpoint is the gateway's URL, e.g. "http://127.0.0.1:41234".
	Endpoint string
	// Client is an S3 client of the gateway with the root credentials (path-style).
	Client *s3.Client
	// Dir is the posix backend's root: a bucket is a directory in it.
	Dir string
}

// Binary returns the path of versitygw, or an error telling how to install it.
func Binary() (string, error) {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("versitygw is not installed: run scripts/install-deps.sh " +
		"(or go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)")
}

// Start starts a gateway for the test and stops it when the test ends. It fails the test if
// versitygw is missing or does not come up.
func Start(t testing.TB) *Gateway {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o750); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for try := 0; try < 3; try++ {
		gw, err := start(t, bin, root, filepath.Join(dir, fmt.Sprintf("versitygw-%d.log", try)))
		if err == nil {
			return gw
		}
		lastErr = err // most likely the free port was taken in between: try another
	}
	t.Fatalf("s3test: versitygw did not start: %v", lastErr)
	return nil
}

func start(t testing.TB, bin, root, logPath string) (*Gateway, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()

	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", addr, "--access", AccessKeyID, "--secret", SecretAccessKey,
		"--region", Region, "--quiet", "posix", root)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The gateway dies with the test binary, even if the binary is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			_ = logFile.Close()
		})
	}

	// Ready when it answers HTTP (any status: an anonymous request is refused with 403).
	endpoint := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, endpoint+"/", nil)
		if err != nil {
			stop()
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("no answer on %s after 20s; log:\n%s", addr, readLog(logPath))
		}
		select {
		case <-exited:
			stop()
			return nil, fmt.Errorf("versitygw exited (%v); log:\n%s", waitErr, readLog(logPath))
		case <-tick.C:
		}
	}
	t.Cleanup(stop)
	client := s3.New(s3.Options{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		UsePathStyle: true,
		BaseEndpoint: aws.String(endpoint),
	})
	return &Gateway{Endpoint: endpoint, Client: client, Dir: root}, nil
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// CreateBucket creates a bucket.
func (g *Gateway) CreateBucket(t testing.TB, bucket string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := g.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("s3test: create bucket %s: %v", bucket, err)
	}
}

// PutObject stores body at bucket/key.
func (g *Gateway) PutObject(t testing.TB, bucket, key, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := g.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: bytes.NewReader([]byte(body))}); err != nil {
		t.Fatalf("s3test: put %s/%s: %v", bucket, key, err)
	}
}

// ObjectExists reports whether bucket/key exists (a HEAD with the root credentials).
func (g *Gateway) ObjectExists(t testing.TB, bucket, key string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := g.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err == nil {
		return true
	}
	var nf *s3types.NotFound
	var nsk *s3types.NoSuchKey
	if errors.As(err, &nf) || errors.As(err, &nsk) {
		return false
	}
	t.Fatalf("s3test: head %s/%s: %v", bucket, key, err)
	return false
}
