package main

import (
	"encoding/json"
	"flag"
	"os"

	"github.com/hibiken/asynq"
)

// action is one Inspector call, read from stdin: op names it, the other fields are its arguments.
type action struct {
	Op    string `json:"op"`
	Queue string `json:"queue"`
	ID    string `json:"id"`
	Group string `json:"group"`
	Force bool   `json:"force"`
}

// doAction runs one Inspector action; n is the count the bulk actions return (1 for the others).
func doAction(insp *asynq.Inspector, a *action) (int, error) {
	one := func(err error) (int, error) {
		if err != nil {
			return 0, err
		}
		return 1, nil
	}
	switch a.Op {
	case "run":
		return one(insp.RunTask(a.Queue, a.ID))
	case "archive":
		return one(insp.ArchiveTask(a.Queue, a.ID))
	case "delete":
		return one(insp.DeleteTask(a.Queue, a.ID))
	case "cancel":
		return one(insp.CancelProcessing(a.ID))
	case "pause":
		return one(insp.PauseQueue(a.Queue))
	case "unpause":
		return one(insp.UnpauseQueue(a.Queue))
	case "delete_queue":
		return one(insp.DeleteQueue(a.Queue, a.Force))
	case "run_all_scheduled":
		return insp.RunAllScheduledTasks(a.Queue)
	case "run_all_retry":
		return insp.RunAllRetryTasks(a.Queue)
	case "run_all_archived":
		return insp.RunAllArchivedTasks(a.Queue)
	case "run_all_aggregating":
		return insp.RunAllAggregatingTasks(a.Queue, a.Group)
	case "archive_all_pending":
		return insp.ArchiveAllPendingTasks(a.Queue)
	case "archive_all_scheduled":
		return insp.ArchiveAllScheduledTasks(a.Queue)
	case "archive_all_retry":
		return insp.ArchiveAllRetryTasks(a.Queue)
	case "archive_all_aggregating":
		return insp.ArchiveAllAggregatingTasks(a.Queue, a.Group)
	case "delete_all_pending":
		return insp.DeleteAllPendingTasks(a.Queue)
	case "delete_all_scheduled":
		return insp.DeleteAllScheduledTasks(a.Queue)
	case "delete_all_retry":
		return insp.DeleteAllRetryTasks(a.Queue)
	case "delete_all_archived":
		return insp.DeleteAllArchivedTasks(a.Queue)
	case "delete_all_completed":
		return insp.DeleteAllCompletedTasks(a.Queue)
	case "delete_all_aggregating":
		return insp.DeleteAllAggregatingTasks(a.Queue, a.Group)
	}
	fail("unknown action %q", a.Op)
	return 0, nil
}

// actCommand reads a JSON list of actions from stdin, runs each with Go's Inspector in order and prints one
// line per action: {"op", "n"} or {"op", "error"}.
func actCommand(fs *flag.FlagSet, common *commonFlags, args []string) {
	fs.Parse(args)
	var actions []action
	if err := json.NewDecoder(os.Stdin).Decode(&actions); err != nil {
		fail("read actions: %v", err)
	}
	insp := asynq.NewInspector(common.connOpt())
	defer insp.Close()
	for i := range actions {
		n, err := doAction(insp, &actions[i])
		if err != nil {
			emit(map[string]any{"op": actions[i].Op, "error": err.Error()})
			continue
		}
		emit(map[string]any{"op": actions[i].Op, "n": n})
	}
}
