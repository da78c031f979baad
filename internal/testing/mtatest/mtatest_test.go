package mtatest_test

import (
	"net/smtp"
	"net/textproto"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/taskorch/taskorch/internal/testing/mtatest"
)

// Postfix delivers a message for a mailbox of its domain to that maildir, refuses a recipient
// of its domain without one (550 5.1.1 at RCPT TO), and stops when the test ends.
func TestPostfixDeliversAndRefuses(t *testing.T) {
	t.Parallel()
	mta := mtatest.Start(t, "ann")

	msg := "From: noreply@sender.test\r\nTo: ann@taskorch.test\r\nSubject: hello\r\nMessage-ID: <mtatest-1@sender.test>\r\n\r\nhi ann\r\n"
	require.NoError(t, smtp.SendMail(mta.Addr, nil, "noreply@sender.test", []string{mta.Address("ann")}, []byte(msg)))
	got := mta.WaitMessages(t, "ann", 1)
	require.Len(t, got, 1)
	require.Contains(t, got[0], "Message-ID: <mtatest-1@sender.test>")
	require.Contains(t, got[0], "Delivered-To: ann@taskorch.test")
	require.Contains(t, got[0], "hi ann")

	err := smtp.SendMail(mta.Addr, nil, "noreply@sender.test", []string{mta.Address("bob")}, []byte(msg))
	var tpErr *textproto.Error
	require.ErrorAs(t, err, &tpErr)
	require.Equal(t, 550, tpErr.Code)
	require.Contains(t, tpErr.Msg, "5.1.1 <bob@taskorch.test>: Recipient address rejected")
	require.Empty(t, mta.Messages(t, "bob"))
	require.Len(t, mta.Messages(t, "ann"), 1, "the refused message went nowhere")

	mta.Stop()
	_, err = smtp.Dial(mta.Addr)
	require.Error(t, err, "stopped")
}
