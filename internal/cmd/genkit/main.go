// Command genkit renders the shipped processes' kit migrations (internal/scaffold) into
// migrations/. Run it from the repository root after changing the kit; it refuses to change a
// migration that exists unless -force is given (an applied migration must not change: put a
// change of the kit in a new migration).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/taskorch/taskorch/internal/scaffold"
)

func main() {
	force := flag.Bool("force", false, "overwrite a migration file that exists and differs (only for one never released)")
	flag.Parse()
	if err := run(*force); err != nil {
		fmt.Fprintln(os.Stderr, "genkit:", err)
		os.Exit(1)
	}
}

func run(force bool) error {
	out, err := scaffold.RenderCommsKit()
	if err != nil {
		return err
	}
	old, err := os.ReadFile(scaffold.CommsKitFile)
	switch {
	case err == nil && bytes.Equal(old, out):
		return nil
	case err == nil && !force:
		return fmt.Errorf("%s exists and the kit renders it differently: a migration that may be applied must not change; write the change as a new migration (or pass -force for one never released)", scaffold.CommsKitFile)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	return os.WriteFile(scaffold.CommsKitFile, out, 0o644)
}
