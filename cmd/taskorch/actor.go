package main

import (
	"os"
	"os/user"
	"strings"

	"github.com/spf13/cobra"
)

// actorEnv names the variable that sets --actor.
const actorEnv = "TASKORCH_ACTOR"

// addActorFlag gives an action command its --actor flag: who is acting, recorded with what the
// command changes (docs/operations.md, "Runbook").
func addActorFlag(cmd *cobra.Command, actor *string) {
	cmd.Flags().StringVar(actor, "actor", "", "who is acting, recorded with the action (env "+actorEnv+"; default: the OS user, else the database role)")
}

// resolveActor returns the actor to record: --actor, else TASKORCH_ACTOR, else the OS user's
// name; "" (the database role, which the database records itself) when none is known.
func resolveActor(flag string) string {
	if s := strings.TrimSpace(flag); s != "" {
		return s
	}
	if s := strings.TrimSpace(os.Getenv(actorEnv)); s != "" {
		return s
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return ""
}
