package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// netns is a network namespace with a veth pair to the host: the host end has hostIP, the
// namespace end nsIP, on a /30 of their own. A worker started in it reaches PostgreSQL only
// through a toxiproxy listener on hostIP.
type netns struct {
	name         string // namespace name
	hostIF, nsIF string // veth ends
	hostIP, nsIP string
	subnet       string // hostIP's /30
	dbURL        string // PostgreSQL through the namespace's toxiproxy listener
	cut          string // how it is cut now ("" when healed)
}

// ip runs the ip command with args.
func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// checkNetns reports whether network namespaces can be made here (root, the ip command).
func checkNetns(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("the network namespace scenario needs root (ip netns add); run as root or pass -netns=false")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("the network namespace scenario needs the ip command (Debian package iproute2); or pass -netns=false")
	}
	name := fmt.Sprintf("tochk%d", os.Getpid())
	if err := ip(ctx, "netns", "add", name); err != nil {
		return fmt.Errorf("ip netns does not work here (pass -netns=false to run without it): %w", err)
	}
	return ip(context.WithoutCancel(ctx), "netns", "del", name)
}

// newNetns makes namespace number i (1-based) with its veth pair: 10.OCT.i.1 on the host,
// 10.OCT.i.2 inside, where OCT is derived from the harness's pid so parallel runs differ.
func newNetns(ctx context.Context, i int) (*netns, error) {
	pid := os.Getpid()
	oct := 200 + pid%50
	n := &netns{
		name:   fmt.Sprintf("taskorch-chaos-%d-%d", pid, i),
		hostIF: fmt.Sprintf("tc%dh%d", pid%1000000, i),
		nsIF:   fmt.Sprintf("tc%dn%d", pid%1000000, i),
		hostIP: fmt.Sprintf("10.%d.%d.1", oct, i),
		nsIP:   fmt.Sprintf("10.%d.%d.2", oct, i),
		subnet: fmt.Sprintf("10.%d.%d.0/30", oct, i),
	}
	steps := [][]string{
		{"netns", "add", n.name},
		{"link", "add", n.hostIF, "type", "veth", "peer", "name", n.nsIF},
		{"link", "set", n.nsIF, "netns", n.name},
		{"addr", "add", n.hostIP + "/30", "dev", n.hostIF},
		{"link", "set", n.hostIF, "up"},
		{"netns", "exec", n.name, "ip", "addr", "add", n.nsIP + "/30", "dev", n.nsIF},
		{"netns", "exec", n.name, "ip", "link", "set", n.nsIF, "up"},
		{"netns", "exec", n.name, "ip", "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			n.remove(ctx)
			return nil, err
		}
	}
	return n, nil
}

// Ways to cut a namespace off, taken in turn: the host's end of the link goes down (packets
// vanish), a blackhole route in the namespace (packets dropped silently), an unreachable
// route (every send fails at once).
var cutMethods = []string{"link down", "blackhole route", "unreachable route"}

// cutOff cuts the namespace off from the host with method (one of cutMethods).
func (n *netns) cutOff(ctx context.Context, method string) error {
	var err error
	switch method {
	case "link down":
		err = ip(ctx, "link", "set", n.hostIF, "down")
	case "blackhole route":
		err = ip(ctx, "netns", "exec", n.name, "ip", "route", "add", "blackhole", n.hostIP+"/32")
	case "unreachable route":
		err = ip(ctx, "netns", "exec", n.name, "ip", "route", "add", "unreachable", n.hostIP+"/32")
	default:
		err = fmt.Errorf("unknown cut method %q", method)
	}
	if err == nil {
		n.cut = method
	}
	return err
}

// heal undoes the current cut.
func (n *netns) heal(ctx context.Context) error {
	var err error
	switch n.cut {
	case "":
		return nil
	case "link down":
		err = ip(ctx, "link", "set", n.hostIF, "up")
	case "blackhole route":
		err = ip(ctx, "netns", "exec", n.name, "ip", "route", "del", "blackhole", n.hostIP+"/32")
	case "unreachable route":
		err = ip(ctx, "netns", "exec", n.name, "ip", "route", "del", "unreachable", n.hostIP+"/32")
	}
	if err == nil {
		n.cut = ""
	}
	return err
}

// remove deletes the veth pair and the namespace (best effort).
func (n *netns) remove(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	_ = ip(ctx, "link", "del", n.hostIF) // deletes both ends
	_ = ip(ctx, "netns", "del", n.name)
}
