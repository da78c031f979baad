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
	"path/filepath"

	"github.com/taskorch/taskorch/internal/scaffold"
)

func main() {
	force := flag.Bool("force", false, "overwrite a migration file that exists and differs (only for one never released)")
	flag.Parse()
	if err := run(".", *force); err != nil {
		fmt.Fprintln(os.Stderr, "genkit:", err)
		os.Exit(1)
	}
}

// run renders every kit file under root.
func run(root string, force bool) error {
	for _, f := range scaffold.KitFiles {
		out, err := f.Render()
		if err != nil {
			return err
		}
		path := filepath.Join(root, f.Path)
		old, err := os.ReadFile(path)
		switch {
		case err == nil && bytes.Equal(old, out):
			continue
		case err == nil && !force:
			return fmt.Errorf("%s exists and the kit renders it differently: a migration that may be applied must not change; write the change as a new migration (or pass -force for one never released)", f.Path)
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // a source directory of the repository
			return err
		}
		if err := os.WriteFile(path, out, 0o644); err != nil { //nolint:gosec // a checked-in migration, readable like the others
			return err
		}
		fmt.Println("genkit: wrote", f.Path)
	}
	return nil
}
