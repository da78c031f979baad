package migrate

import "github.com/taskorch/taskorch/migrations"

// Shipped loads the shipped sets named (migrations.Sets), in the order given.
func Shipped(names ...string) ([]Set, error) {
	out := make([]Set, 0, len(names))
	for _, n := range names {
		fsys, err := migrations.SetFS(n)
		if err != nil {
			return nil, err
		}
		var amended map[int]Amendment
		for _, a := range migrations.Amended(n) {
			if amended == nil {
				amended = map[int]Amendment{}
			}
			amended[a.Version] = Amendment{File: a.File, Recorded: a.Recorded}
		}
		s, err := Load(fsys, SetSpec{Name: n, Watch: migrations.Watch(n), History: migrations.History(n), Amended: amended})
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
