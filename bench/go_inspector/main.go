// Command goinspector is the Go asynq side of bench/inspector_bench.py.
//
// It uses the released github.com/hibiken/asynq v0.26.0 Inspector with its default settings. Each
// subcommand times only the Inspector calls (not process start-up or connecting) and prints one JSON
// object on stdout: {"ms": [one duration per repetition], ...}.
//
//	goinspector queueinfo -redis URL -reps N -warmup W
//	    what Go's metrics exporter does per scrape: Queues(), then GetQueueInfo for every queue
//	goinspector list -redis URL -queue Q -state pending|archived -page P -size S -reps N -warmup W
//	    ListPendingTasks / ListArchivedTasks with Page(P), PageSize(S); also prints the page's task IDs
//	goinspector runall -redis URL -queue Q
//	    one RunAllArchivedTasks (it is destructive, so one repetition per call)
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/hibiken/asynq"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "goinspector: "+format+"\n", args...)
	os.Exit(1)
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// timed runs fn warmup times untimed, then reps times timed, and returns each timed duration in ms.
func timed(reps, warmup int, fn func() error) []float64 {
	for i := 0; i < warmup; i++ {
		if err := fn(); err != nil {
			fail("%v", err)
		}
	}
	out := make([]float64, 0, reps)
	for i := 0; i < reps; i++ {
		t0 := time.Now()
		if err := fn(); err != nil {
			fail("%v", err)
		}
		out = append(out, ms(time.Since(t0)))
	}
	return out
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: goinspector queueinfo|list|runall [flags]")
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	url := fs.String("redis", "redis://127.0.0.1:6379/0", "Redis URL")
	reps := fs.Int("reps", 5, "timed repetitions")
	warmup := fs.Int("warmup", 1, "untimed repetitions first")
	queue := fs.String("queue", "", "queue name")
	state := fs.String("state", "pending", "list: pending or archived")
	page := fs.Int("page", 1, "list: page number (1-based)")
	size := fs.Int("size", 30, "list: page size")
	if err := fs.Parse(os.Args[2:]); err != nil {
		fail("%v", err)
	}
	opt, err := asynq.ParseRedisURI(*url)
	if err != nil {
		fail("redis url: %v", err)
	}
	insp := asynq.NewInspector(opt)
	defer insp.Close()

	out := map[string]any{}
	switch cmd {
	case "queueinfo":
		var queues, tasks int
		out["ms"] = timed(*reps, *warmup, func() error {
			qs, err := insp.Queues()
			if err != nil {
				return err
			}
			queues, tasks = len(qs), 0
			for _, q := range qs {
				info, err := insp.GetQueueInfo(q)
				if err != nil {
					return fmt.Errorf("GetQueueInfo(%q): %w", q, err)
				}
				tasks += info.Size
			}
			return nil
		})
		out["queues"], out["tasks"] = queues, tasks
	case "list":
		var ids []string
		list := insp.ListPendingTasks
		switch *state {
		case "pending":
		case "archived":
			list = insp.ListArchivedTasks
		default:
			fail("list: state must be pending or archived, got %q", *state)
		}
		out["ms"] = timed(*reps, *warmup, func() error {
			infos, err := list(*queue, asynq.Page(*page), asynq.PageSize(*size))
			if err != nil {
				return err
			}
			ids = ids[:0]
			for _, t := range infos {
				ids = append(ids, t.ID)
			}
			return nil
		})
		out["ids"] = ids
	case "runall":
		var n int
		out["ms"] = timed(1, 0, func() error {
			var err error
			n, err = insp.RunAllArchivedTasks(*queue)
			return err
		})
		out["moved"] = n
	default:
		fail("unknown command %q", cmd)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail("%v", err)
	}
}
