// Package mtatest starts a real mail server for a test: Debian's Postfix, configured in a
// temporary directory, listening on 127.0.0.1 at a free port, delivering the mail of its one
// domain (Domain) to maildirs the test reads; stopped when the test ends.
//
//	mta := mtatest.Start(t, "ann")                   // ann@taskorch.test has a mailbox
//	smtp, _ := providers.NewSMTP(providers.SMTPConfig{URL: mta.URL(), From: "noreply@sender.test"})
//	msgs := mta.WaitMessages(t, "ann", 1)            // what was delivered to ann's maildir
//
// A recipient of Domain without a mailbox is refused at RCPT TO with Postfix's own reply, "550
// 5.1.1 <bob@taskorch.test>: Recipient address rejected: User unknown in virtual mailbox table".
// Nothing leaves the machine: every other domain's mail, bounces included, goes to Postfix's
// error transport.
//
// Postfix is installed by scripts/install-deps.sh (apt package postfix, without a system
// configuration: the tests never use /etc/postfix/main.cf nor start the system's service). Its
// master daemon runs as root and starts its services as the postfix user, so the tests that use
// it need root, as CI runs them; a test that needs it fails, never skips, when Postfix is
// missing or it is not root.
package mtatest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Domain is the mail domain the server delivers locally: a mailbox "ann" is ann@taskorch.test.
const Domain = "taskorch.test"

// startTimeout bounds how long Postfix may take to answer its first connection.
const startTimeout = 30 * time.Second

// Server is a Postfix run for a test.
type Server struct {
	// Addr is the SMTP listener, 127.0.0.1:port.
	Addr string

	dir  string
	port int

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// binaries are the Postfix programs a server runs.
type binaries struct{ postfix, master string }

// findPostfix returns Postfix's programs, or an error telling how to install them.
func findPostfix() (binaries, error) {
	var b binaries
	postfix, err := exec.LookPath("postfix")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/postfix"); statErr != nil {
			return b, errors.New("postfix is not installed: run scripts/install-deps.sh (apt package postfix)")
		}
		postfix = "/usr/sbin/postfix"
	}
	postconf := filepath.Join(filepath.Dir(postfix), "postconf")
	out, err := exec.Command(postconf, "-d", "-h", "daemon_directory").Output() //nolint:gosec // Postfix's own postconf
	if err != nil {
		return b, fmt.Errorf("postconf -d daemon_directory: %w", err)
	}
	master := filepath.Join(strings.TrimSpace(string(out)), "master")
	if _, err := os.Stat(master); err != nil {
		return b, fmt.Errorf("postfix's master daemon is not at %s: %w", master, err)
	}
	return binaries{postfix: postfix, master: master}, nil
}

// Start starts Postfix for t with a mailbox for each name (name@Domain), and stops it when the
// test ends. It fails t when Postfix is missing, the test does not run as root, or Postfix does
// not come up (with its log).
func Start(t testing.TB, mailboxes ...string) *Server {
	t.Helper()
	bins, err := findPostfix()
	if err != nil {
		t.Fatalf("mtatest: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("mtatest: Postfix's master daemon must be started as root (it runs its services as the postfix user): run the tests as root, as CI does")
	}
	owner, err := user.Lookup("postfix")
	if err != nil {
		t.Fatalf("mtatest: the postfix user is missing (the apt package postfix makes it): %v", err)
	}
	uid, _ := strconv.Atoi(owner.Uid)
	gid, _ := strconv.Atoi(owner.Gid)
	for _, m := range mailboxes {
		if m == "" || strings.ContainsAny(m, "@/ \t\n") {
			t.Fatalf("mtatest: mailbox %q must be a plain local part", m)
		}
	}

	// Not t.TempDir(): its parent is private to root, and Postfix's services run as the
	// postfix user (the queue) and as nobody (the maildirs).
	dir, err := os.MkdirTemp("", "mtatest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // Postfix's services must reach the queue inside
		t.Fatal(err)
	}
	for _, sub := range []string{"etc", "spool", "data", "mail", "log"} {
		// Chmod too: the modes must not depend on the test's umask.
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil { //nolint:gosec // as Postfix's own directories
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, sub), 0o755); err != nil { //nolint:gosec // as Postfix's own directories
			t.Fatal(err)
		}
	}
	// Postfix keeps its lock and caches in data, owned by the postfix user; the virtual
	// delivery agent writes the maildirs as nobody (65534).
	if err := os.Chown(filepath.Join(dir, "data"), uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(dir, "mail"), 65534, 65534); err != nil {
		t.Fatal(err)
	}

	s := &Server{dir: dir, port: freePort(t)}
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	var boxes strings.Builder
	for _, m := range mailboxes {
		fmt.Fprintf(&boxes, "%s@%s %s/\n", m, Domain, m)
	}
	write(t, filepath.Join(dir, "etc", "vmailbox"), boxes.String())
	write(t, filepath.Join(dir, "etc", "main.cf"), mainCF(dir))
	write(t, filepath.Join(dir, "etc", "master.cf"), masterCF(s.Addr))

	// postfix check makes the queue's directories with their owners and modes.
	conf := filepath.Join(dir, "etc")
	if out, err := exec.Command(bins.postfix, "-c", conf, "check").CombinedOutput(); err != nil { //nolint:gosec // Postfix's own command
		t.Fatalf("mtatest: postfix check: %v: %s%s", err, out, s.logTail())
	}
	// The master daemon in the foreground (-s: no daemon of its own), so the test owns it; it
	// passes SIGTERM to its services. -e: it ends by itself after an hour, should the test
	// binary die without stopping it.
	cmd := exec.Command(bins.master, "-s", "-c", conf, "-e", "3600") //nolint:gosec // Postfix's own daemon
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		t.Fatalf("mtatest: starting postfix's master: %v", err)
	}
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.exited) }()
	t.Cleanup(s.Stop)

	deadline := time.Now().Add(startTimeout)
	for !banner(s.Addr) {
		select {
		case <-s.exited:
			t.Fatalf("mtatest: postfix's master exited at start: %s", s.logTail())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mtatest: postfix on %s did not answer within %s: %s", s.Addr, startTimeout, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

// mainCF is Postfix's main.cf for a server in dir: mail for Domain to the maildirs of
// etc/vmailbox, everything else to the error transport, the log in log/maillog.
func mainCF(dir string) string {
	return fmt.Sprintf(`compatibility_level = 3.6
queue_directory = %[1]s/spool
data_directory = %[1]s/data
maillog_file = %[1]s/log/maillog
maillog_file_prefixes = %[1]s/log
inet_protocols = ipv4
inet_interfaces = 127.0.0.1
myhostname = mx.%[2]s
mydomain = %[2]s
myorigin = $myhostname
mydestination =
mynetworks = 127.0.0.0/8
alias_maps =
alias_database =
local_recipient_maps =
biff = no
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination
smtpd_tls_security_level = none
virtual_mailbox_domains = %[2]s
virtual_mailbox_base = %[1]s/mail
virtual_mailbox_maps = texthash:%[1]s/etc/vmailbox
virtual_uid_maps = static:65534
virtual_gid_maps = static:65534
default_transport = error:mtatest delivers to %[2]s only
relay_transport = error:mtatest delivers to %[2]s only
smtp_dns_support_level = disabled
`, dir, Domain)
}

// masterCF is Postfix's master.cf: the SMTP listener at addr and the services it needs, none
// chrooted.
func masterCF(addr string) string {
	return addr + ` inet n - n - - smtpd
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
virtual   unix  -       n       n       -       -       virtual
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
`
}

// URL is the server's TASKORCH_SMTP_URL: plain SMTP (it offers no STARTTLS), no
// authentication.
func (s *Server) URL() string { return "smtp://" + s.Addr + "?starttls=none" }

// Address is mailbox's address, mailbox@Domain.
func (s *Server) Address(mailbox string) string { return mailbox + "@" + Domain }

// Messages returns the messages delivered to mailbox so far, each as its raw file (the headers
// Postfix added first), in the order of their file names.
func (s *Server) Messages(t testing.TB, mailbox string) []string {
	t.Helper()
	var names []string
	for _, sub := range []string{"new", "cur"} {
		entries, err := os.ReadDir(filepath.Join(s.dir, "mail", mailbox, sub))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatalf("mtatest: reading %s's maildir: %v", mailbox, err)
		}
		for _, e := range entries {
			names = append(names, filepath.Join(s.dir, "mail", mailbox, sub, e.Name()))
		}
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(n) //nolint:gosec // a file of the test's own maildir
		if err != nil {
			t.Fatalf("mtatest: %v", err)
		}
		out = append(out, string(b))
	}
	return out
}

// WaitMessages waits until mailbox holds at least n messages (Postfix delivers after it
// accepted the message) and returns them; it fails t after 30 seconds, with the server's log.
func (s *Server) WaitMessages(t testing.TB, mailbox string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msgs := s.Messages(t, mailbox)
		if len(msgs) >= n {
			return msgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("mtatest: %d of %d messages delivered to %s within 30s: %s", len(msgs), n, mailbox, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Log returns the server's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log", "maillog"))
	return string(b)
}

func (s *Server) logTail() string {
	l := s.Log()
	if len(l) > 4000 {
		l = "..." + l[len(l)-4000:]
	}
	if l == "" {
		return "(postfix logged nothing)"
	}
	return "postfix's log:\n" + l
}

// Stop stops the server: its master daemon passes SIGTERM to its services. It may be called
// twice.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// banner reports whether an SMTP server at addr greets with 220 within a second.
func banner(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "220") {
		return false
	}
	_, _ = c.Write([]byte("QUIT\r\n"))
	return true
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil { //nolint:gosec // Postfix's configuration, readable by its services
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { //nolint:gosec // whatever the test's umask
		t.Fatal(err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("mtatest: finding a free port: %v", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
