package main

import "github.com/hibiken/asynq"

// The JSON shapes use the field names listed in ../data/README.md.

func taskJSON(t *asynq.TaskInfo) map[string]any {
	m := map[string]any{
		"id": t.ID, "queue": t.Queue, "type": t.Type, "state": t.State.String(), "max_retry": t.MaxRetry,
		"retried": t.Retried, "last_err": t.LastErr, "last_failed_at": timeOrNil(t.LastFailedAt),
		"timeout_s": t.Timeout.Seconds(), "deadline": timeOrNil(t.Deadline), "group": t.Group,
		"next_process_at": timeOrNil(t.NextProcessAt), "is_orphaned": t.IsOrphaned,
		"retention_s": t.Retention.Seconds(), "completed_at": timeOrNil(t.CompletedAt), "headers": taskHeaders(t),
		"payload": text(t.Payload), "payload_b64": b64(t.Payload), "result": text(t.Result),
	}
	if t.Result != nil {
		m["result_b64"] = b64(t.Result)
	}
	return m
}

func tasksJSON(ts []*asynq.TaskInfo) []map[string]any {
	out := make([]map[string]any, 0, len(ts))
	for _, t := range ts {
		out = append(out, taskJSON(t))
	}
	return out
}

func queueInfoJSON(q *asynq.QueueInfo) map[string]any {
	return map[string]any{
		"queue": q.Queue, "memory_usage": q.MemoryUsage, "latency_s": q.Latency.Seconds(), "size": q.Size,
		"groups": q.Groups, "pending": q.Pending, "active": q.Active, "scheduled": q.Scheduled, "retry": q.Retry,
		"archived": q.Archived, "completed": q.Completed, "aggregating": q.Aggregating, "processed": q.Processed,
		"failed": q.Failed, "processed_total": q.ProcessedTotal, "failed_total": q.FailedTotal, "paused": q.Paused,
		"timestamp": q.Timestamp.UTC(),
	}
}

func serverJSON(s *asynq.ServerInfo) map[string]any {
	workers := make([]map[string]any, 0, len(s.ActiveWorkers))
	for _, w := range s.ActiveWorkers {
		workers = append(workers, map[string]any{
			"task_id": w.TaskID, "task_type": w.TaskType, "task_payload": text(w.TaskPayload),
			"task_payload_b64": b64(w.TaskPayload), "queue": w.Queue, "started": timeOrNil(w.Started),
			"deadline": timeOrNil(w.Deadline),
		})
	}
	return map[string]any{
		"id": s.ID, "host": s.Host, "pid": s.PID, "concurrency": s.Concurrency, "queues": s.Queues,
		"strict_priority": s.StrictPriority, "started": timeOrNil(s.Started), "status": s.Status,
		"active_workers": workers,
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
			"id": e.ID, "spec": e.Spec, "task_type": e.Task.Type(), "task_payload": text(e.Task.Payload()),
			"task_payload_b64": b64(e.Task.Payload()), "opts": opts, "next": timeOrNil(e.Next),
			"prev": timeOrNil(e.Prev), "enqueue_events": events,
		})
	}
	return out
}
