package main

import (
	"io"
	"os"
)

// isTTY reports whether w is a terminal (a character device): progress is shown there only.
func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
