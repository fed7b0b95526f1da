package main

import (
	"flag"
	"sort"
	"strings"

	"github.com/hibiken/asynq"
)

// pageAll is large enough to list every task a test writes in one page.
var pageAll = asynq.PageSize(10000)

// must stops the program on an Inspector error: a test wants to see it, not a partial answer.
func must[T any](v T, err error) T {
	if err != nil {
		fail("inspector: %v", err)
	}
	return v
}

func registerInspectFlags(fs *flag.FlagSet) *[]string {
	var lookups []string
	fs.Func("task", "queue=id to look up with GetTaskInfo (repeatable)", func(s string) error {
		lookups = append(lookups, s)
		return nil
	})
	return &lookups
}

// inspectCommand prints one JSON object: queues, per_queue (info, today, every state's tasks, groups),
// servers with active workers, scheduler entries with their enqueue events, and the --task lookups.
func inspectCommand(fs *flag.FlagSet, common *commonFlags, args []string) {
	lookups := registerInspectFlags(fs)
	fs.Parse(args)
	runInspect(common.connOpt(), *lookups)
}

// runInspect is inspectCommand on any connection (one server, or a cluster: cluster.go).
func runInspect(opt asynq.RedisConnOpt, lookups []string) {
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	queues := must(insp.Queues())
	sort.Strings(queues)
	perQueue := map[string]any{}
	for _, q := range queues {
		perQueue[q] = inspectQueue(insp, q)
	}
	servers := []map[string]any{}
	for _, s := range must(insp.Servers()) {
		servers = append(servers, serverJSON(s))
	}
	emit(map[string]any{
		"queues":            queues,
		"per_queue":         perQueue,
		"servers":           servers,
		"scheduler_entries": schedulerEntries(insp),
		"tasks":             lookupTasks(insp, lookups),
	})
}

func inspectQueue(insp *asynq.Inspector, q string) map[string]any {
	today := must(insp.History(q, 1))[0]
	groups := []map[string]any{}
	for _, g := range must(insp.Groups(q)) {
		groups = append(groups, map[string]any{
			"group": g.Group, "size": g.Size,
			"tasks": tasksJSON(must(insp.ListAggregatingTasks(q, g.Group, pageAll))),
		})
	}
	return map[string]any{
		"info":      queueInfoJSON(must(insp.GetQueueInfo(q))),
		"today":     map[string]any{"date": today.Date.UTC().Format("2006-01-02"), "processed": today.Processed, "failed": today.Failed},
		"pending":   tasksJSON(must(insp.ListPendingTasks(q, pageAll))),
		"active":    tasksJSON(must(insp.ListActiveTasks(q, pageAll))),
		"scheduled": tasksJSON(must(insp.ListScheduledTasks(q, pageAll))),
		"retry":     tasksJSON(must(insp.ListRetryTasks(q, pageAll))),
		"archived":  tasksJSON(must(insp.ListArchivedTasks(q, pageAll))),
		"completed": tasksJSON(must(insp.ListCompletedTasks(q, pageAll))),
		"groups":    groups,
	}
}

func schedulerEntries(insp *asynq.Inspector) []map[string]any {
	out := []map[string]any{}
	for _, e := range must(insp.SchedulerEntries()) {
		opts := []string{}
		for _, o := range e.Opts {
			opts = append(opts, o.String())
		}
		events := []map[string]any{}
		for _, ev := range must(insp.ListSchedulerEnqueueEvents(e.ID, pageAll)) {
			events = append(events, map[string]any{"task_id": ev.TaskID, "enqueued_at": ev.EnqueuedAt.UTC()})
		}
		out = append(out, map[string]any{
			"id": e.ID, "spec": e.Spec, "task_type": e.Task.Type(),
			"task_payload": text(e.Task.Payload()), "task_payload_b64": b64(e.Task.Payload()),
			"opts": opts, "next": timeOrNil(e.Next), "prev": timeOrNil(e.Prev), "enqueue_events": events,
		})
	}
	return out
}

// lookupTasks runs GetTaskInfo for each "queue=id"; a failed lookup reports its error text.
func lookupTasks(insp *asynq.Inspector, lookups []string) []map[string]any {
	out := []map[string]any{}
	for _, l := range lookups {
		q, id, _ := strings.Cut(l, "=")
		info, err := insp.GetTaskInfo(q, id)
		if err != nil {
			out = append(out, map[string]any{"queue": q, "id": id, "error": err.Error()})
			continue
		}
		out = append(out, taskJSON(info))
	}
	return out
}
