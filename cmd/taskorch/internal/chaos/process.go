package chaos

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// processSpec describes a child process of the harness.
type processSpec struct {
	name    string
	argv    []string
	env     []string // added to the harness's environment
	logPath string   // stdout and stderr, appended
	// clean drops the harness's own TASKORCH_*, DATABASE_URL and OTEL_* variables from what
	// the process inherits: a worker gets only the settings the harness gives it.
	clean bool
}

// inheritedEnv is the harness's environment, cleaned as spec.clean says.
func inheritedEnv(clean bool) []string {
	var out []string
	for _, kv := range os.Environ() {
		if clean && (strings.HasPrefix(kv, "TASKORCH_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "OTEL_")) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// process is a child process: a worker, toxiproxy-server or redis-server. It dies with the
// harness (Pdeathsig), so a killed harness leaves none behind.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed

	mu      sync.Mutex
	stopped bool // SIGSTOPped and not yet continued
}

func startProcess(spec processSpec) (*process, error) {
	f, err := os.OpenFile(spec.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(spec.argv[0], spec.argv[1:]...)
	cmd.Env = append(inheritedEnv(spec.clean), spec.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("start %s: %w", spec.name, err)
	}
	p := &process{name: spec.name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// pid is the process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signal sends sig; a process that already exited is not an error.
func (p *process) signal(sig syscall.Signal) error {
	err := p.cmd.Process.Signal(sig)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// pause stops the process (SIGSTOP); resume continues it (SIGCONT).
func (p *process) pause() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	return p.signal(syscall.SIGSTOP)
}

func (p *process) resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = false
	return p.signal(syscall.SIGCONT)
}

// kill sends SIGKILL and waits for the exit.
func (p *process) kill() {
	_ = p.signal(syscall.SIGKILL)
	<-p.done
}

// terminate sends SIGTERM (after SIGCONT, if paused) and waits up to grace for the exit, then
// kills. It reports whether the process exited by itself.
func (p *process) terminate(grace time.Duration) bool {
	_ = p.resume()
	_ = p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		p.kill()
		return false
	}
}

// freePort returns a TCP port free on 127.0.0.1 at the time of the call.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
