package scaffold

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A spec with a bad name, channel, handler or word is refused with what is wrong; nothing is
// rendered.
func TestChannelKitRefusesBadSpec(t *testing.T) {
	t.Parallel()
	good := CommsKit[0]
	for name, tc := range map[string]struct {
		edit func(p *ChannelProcess)
		want string
	}{
		"name with a quote":      {func(p *ChannelProcess) { p.Name = "send'x" }, `name "send'x" must be`},
		"upper-case schema":      {func(p *ChannelProcess) { p.Schema = "Comms" }, `schema "Comms" must be`},
		"long name":              {func(p *ChannelProcess) { p.Name = "a234567890123456789012345678901" }, "must be 1 to 30"},
		"channel with a space":   {func(p *ChannelProcess) { p.Channel = "e mail" }, `channel "e mail" is not a task type`},
		"handler without schema": {func(p *ChannelProcess) { p.SuccessFn = "record_email_success" }, `success handler "record_email_success" must be schema.name`},
		"key table injection":    {func(p *ChannelProcess) { p.KeyTable = "comms.x; drop table y" }, "key table"},
		"noun with a quote":      {func(p *ChannelProcess) { p.Noun = "it's" }, "plain words"},
		"empty verb":             {func(p *ChannelProcess) { p.Verb = "" }, "plain words"},
		"bad result column":      {func(p *ChannelProcess) { p.ResultColumn = "provider response" }, "result column"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := good
			tc.edit(&p)
			out, err := p.Definitions()
			require.ErrorIs(t, err, ErrInvalid)
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, out)
		})
	}
}

// The shipped processes' specs render: one file per function and view, each under its
// schema's folder, with the run-aware, permanent-failure and plan-settings forms.
func TestShippedKitsRender(t *testing.T) {
	t.Parallel()
	for _, p := range append(append([]ChannelProcess{}, CommsKit...), FilesKit...) {
		defs, err := p.Definitions()
		require.NoError(t, err)
		paths := map[string]bool{}
		for _, d := range defs {
			require.False(t, paths[d.Path], d.Path)
			paths[d.Path] = true
			require.Regexp(t, `^(functions|views)/`+p.Schema+`/[a-z_]+\.sql$`, d.Path)
			require.Contains(t, string(d.SQL), "create or replace ")
		}
		sup := string(defs[6].SQL)
		require.Contains(t, sup, p.Schema+"."+p.Name+"_supervisor(_payload jsonb)")
		require.Contains(t, sup, "permanent_error", "a permanent failure ends the run")
		require.Contains(t, sup, p.Name+"_run(_id)", "run-aware")
		require.Contains(t, string(defs[0].SQL), "set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off")
	}
}
