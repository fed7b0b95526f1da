package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
)

type workFlags struct {
	queues      *string
	concurrency *int
	retryDelayS *float64
	duration    *time.Duration
	expect      *int
	strict      *bool
	forwardS    *float64
}

func registerWorkFlags(fs *flag.FlagSet) *workFlags {
	return &workFlags{
		queues:      fs.String("queues", "default=1", "queue=priority,..."),
		concurrency: fs.Int("concurrency", 4, "worker goroutines"),
		retryDelayS: fs.Float64("retry-delay-s", 3600, "retry delay in seconds for every failure"),
		duration:    fs.Duration("duration", 20*time.Second, "stop after this long"),
		expect:      fs.Int("expect", 0, "stop after this many handler calls (0: run for --duration)"),
		strict:      fs.Bool("strict", false, "strict priority"),
		forwardS:    fs.Float64("forward-s", 1, "scheduled/retry forwarding interval in seconds"),
	}
}

func parseQueues(s string) map[string]int {
	queues := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		name, prio, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(prio)
		if !ok || err != nil {
			fail("bad --queues entry %q (want name=priority)", part)
		}
		queues[name] = n
	}
	return queues
}

// handle behaves by type prefix: ok: succeeds with result "ok:<id>", fail: returns "boom <id>",
// skip: wraps asynq.SkipRetry, sleep: sleeps payload milliseconds; any other type succeeds.
func handle(ctx context.Context, t *asynq.Task) error {
	id, _ := asynq.GetTaskID(ctx)
	switch {
	case strings.HasPrefix(t.Type(), "ok:"):
		_, err := t.ResultWriter().Write([]byte("ok:" + id))
		return err
	case strings.HasPrefix(t.Type(), "fail:"):
		return fmt.Errorf("boom %s", id)
	case strings.HasPrefix(t.Type(), "skip:"):
		return fmt.Errorf("skip %s: %w", id, asynq.SkipRetry)
	case strings.HasPrefix(t.Type(), "sleep:"):
		ms, _ := strconv.Atoi(string(t.Payload()))
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func callJSON(ctx context.Context, t *asynq.Task) map[string]any {
	id, _ := asynq.GetTaskID(ctx)
	queue, _ := asynq.GetQueueName(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	deadline, _ := ctx.Deadline()
	return map[string]any{
		"id": id, "type": t.Type(), "payload_b64": b64(t.Payload()), "headers": taskHeaders(t),
		"queue": queue, "retry_count": retried, "max_retry": maxRetry,
		"deadline_unix": float64(deadline.UnixNano()) / 1e9,
		"started_unix":  float64(time.Now().UnixNano()) / 1e9,
	}
}

// workCommand runs a Go asynq.Server until --expect handler calls have returned (and their results
// are written), or --duration has passed, printing one JSON line per handler call.
func workCommand(fs *flag.FlagSet, common *commonFlags, args []string) {
	wf := registerWorkFlags(fs)
	fs.Parse(args)
	runWork(common.connOpt(), wf)
}

// runWork is workCommand on any connection (one server, or a cluster: cluster.go).
func runWork(opt asynq.RedisConnOpt, wf *workFlags) {
	delay := seconds(*wf.retryDelayS)
	cfg := asynq.Config{
		Concurrency:              *wf.concurrency,
		Queues:                   parseQueues(*wf.queues),
		StrictPriority:           *wf.strict,
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return delay },
		DelayedTaskCheckInterval: seconds(*wf.forwardS),
		ShutdownTimeout:          3 * time.Second,
		LogLevel:                 asynq.WarnLevel,
	}
	setTaskCheckInterval(&cfg, 100*time.Millisecond)
	srv := asynq.NewServer(opt, cfg)
	var calls atomic.Int64
	enough := make(chan struct{})
	handler := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		emit(callJSON(ctx, t))
		err := handle(ctx, t)
		if n := calls.Add(1); *wf.expect > 0 && n == int64(*wf.expect) {
			close(enough)
		}
		return err
	})
	if err := srv.Start(handler); err != nil {
		fail("start server: %v", err)
	}
	select {
	case <-enough:
	case <-time.After(*wf.duration):
	}
	srv.Shutdown() // waits for running handlers and their state writes
}
