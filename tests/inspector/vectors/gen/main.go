// Command vectorsgen writes the golden vectors in ../data: it drives the real hibiken/asynq (client, server,
// scheduler) against an empty Redis, then dumps every key asynq left there and what asynq's Inspector reports.
// Run it through ../regenerate.py, which starts a private Redis and picks the asynq release.
//
// Usage: vectorsgen --redis host:port --out DIR --label v0.26.0
package main

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vectorsgen: "+format+"\n", args...)
	os.Exit(2)
}

func must[T any](v T, err error) T {
	if err != nil {
		fail("%v", err)
	}
	return v
}

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "an empty Redis, host:port")
	out := flag.String("out", ".", "directory for the three files")
	label := flag.String("label", "", "the asynq release, e.g. v0.26.0 (names the files)")
	flag.Parse()
	if *label == "" {
		fail("--label is required")
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	if n := must(rdb.DBSize(ctx).Result()); n != 0 {
		fail("the Redis at %s holds %d keys: give an empty one", *addr, n)
	}
	opt := asynq.RedisClientOpt{Addr: *addr}
	base := filepath.Join(*out, "asynq-"+*label+"-state")

	client := asynq.NewClient(opt)
	defer client.Close()
	var enqueued []map[string]any
	enqueue := func(t *asynq.Task, opts ...asynq.Option) {
		info, err := client.Enqueue(t, opts...)
		if err != nil {
			kind := "other"
			if errors.Is(err, asynq.ErrDuplicateTask) {
				kind = "duplicate_task"
			}
			enqueued = append(enqueued, map[string]any{"event": "enqueue_error", "index": 0, "error": err.Error(), "kind": kind})
			return
		}
		m := taskJSON(info)
		m["event"], m["index"] = "enqueued", 0
		enqueued = append(enqueued, m)
	}

	// vq: the producer side, never processed.
	vq := asynq.Queue("vq")
	enqueue(asynq.NewTask("v:plain", []byte("hello")), vq, asynq.TaskID("t-plain"))
	if hasHeaders {
		enqueue(newTaskWithHeaders("v:opts", []byte(`{"a":1}`), map[string]string{"k1": "v1", "k2": "v2"}), vq,
			asynq.TaskID("t-opts"), asynq.MaxRetry(3), asynq.Timeout(45*time.Second), asynq.Retention(600*time.Second))
	}
	enqueue(asynq.NewTask("v:deadline", []byte("dl")), vq, asynq.TaskID("t-deadline"),
		asynq.Deadline(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)))
	enqueue(asynq.NewTask("v:sched", []byte("later")), vq, asynq.TaskID("t-sched"), asynq.ProcessIn(time.Hour))
	enqueue(asynq.NewTask("v:uniq", []byte("same")), vq, asynq.TaskID("t-uniq"), asynq.Unique(300*time.Second))
	enqueue(asynq.NewTask("v:uniq", []byte("same")), vq, asynq.TaskID("t-uniq-dup"), asynq.Unique(300*time.Second))
	enqueue(asynq.NewTask("v:uniqsched", []byte("u2")), vq, asynq.TaskID("t-uniqsched"),
		asynq.Unique(900*time.Second), asynq.ProcessIn(10*time.Minute))
	enqueue(asynq.NewTask("v:group", []byte("g1")), vq, asynq.TaskID("t-group1"), asynq.Group("grp"))
	enqueue(asynq.NewTask("v:nilpayload", nil), vq, asynq.TaskID("t-empty"))

	// wq: processed by a Go worker for 3 s (retry delay 1 h); lq: one task running at dump time.
	wq := asynq.Queue("wq")
	enqueue(asynq.NewTask("v:fail", []byte("fail-a")), wq, asynq.TaskID("t-fail"), asynq.MaxRetry(2))
	enqueue(asynq.NewTask("v:failarch", []byte("fail-b")), wq, asynq.TaskID("t-failarch"), asynq.MaxRetry(0))
	enqueue(asynq.NewTask("v:skip", []byte("skip-c")), wq, asynq.TaskID("t-skip"))
	enqueue(asynq.NewTask("v:keep", []byte("keep-d")), wq, asynq.TaskID("t-keep"), asynq.Retention(time.Hour))
	enqueue(asynq.NewTask("v:done", []byte("done-e")), wq, asynq.TaskID("t-done"))
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency:    3,
		Queues:         map[string]int{"lq": 3, "wq": 1},
		RetryDelayFunc: func(int, error, *asynq.Task) time.Duration { return time.Hour },
		LogLevel:       asynq.WarnLevel,
	})
	if err := srv.Start(asynq.HandlerFunc(handle)); err != nil {
		fail("start server: %v", err)
	}
	time.Sleep(3 * time.Second)
	enqueue(asynq.NewTask("v:sleep", []byte("sleep:20")), asynq.Queue("lq"), asynq.TaskID("t-active"))

	// cq: a live scheduler enqueues every 2 s.
	sched := asynq.NewScheduler(opt, &asynq.SchedulerOpts{LogLevel: asynq.WarnLevel, HeartbeatInterval: 5 * time.Second})
	must(sched.Register("@every 2s", asynq.NewTask("v:cron", []byte("tick")), asynq.Queue("cq")))
	if err := sched.Start(); err != nil {
		fail("start scheduler: %v", err)
	}
	time.Sleep(6500 * time.Millisecond)

	writeJSONLines(base+".enqueue.jsonl", enqueued)
	writeJSON(base+".json", map[string]any{
		"note": "Redis state written by the real Go asynq; printable UTF-8 values as strings, others as {hex}. " +
			"Load with the listed types; scores are as Go wrote them; TTLs in seconds at dump time.",
		"redis":      redisVersion(ctx, rdb),
		"written_by": map[string]any{"asynq": *label},
		"keys":       dump(ctx, rdb),
	})
	writeJSON(base+".inspect.json", inspect(opt))
	sched.Shutdown()
	srv.Shutdown()
}

// handle: v:fail* fail, v:skip skips retry, v:sleep sleeps the payload's seconds, the rest succeed with a result.
func handle(ctx context.Context, t *asynq.Task) error {
	p := string(t.Payload())
	switch t.Type() {
	case "v:fail", "v:failarch":
		return fmt.Errorf("handler failure for %q", p)
	case "v:skip":
		return fmt.Errorf("handler skip for %q: %w", p, asynq.SkipRetry)
	case "v:sleep":
		n, _ := strconv.Atoi(strings.TrimPrefix(p, "sleep:"))
		select {
		case <-time.After(time.Duration(n) * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	_, err := t.ResultWriter().Write([]byte("done:" + p))
	return err
}

// value is a dumped value: printable UTF-8 as a string, anything else as {"hex": ...}.
func value(s string) any {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return map[string]string{"hex": hex.EncodeToString([]byte(s))}
}

func dump(ctx context.Context, rdb *redis.Client) map[string]any {
	out := map[string]any{}
	for _, key := range must(rdb.Keys(ctx, "*").Result()) {
		kind := must(rdb.Type(ctx, key).Result())
		ttl := must(rdb.TTL(ctx, key).Result())
		secs := int64(-1)
		if ttl > 0 {
			secs = int64(ttl / time.Second)
		}
		var v any
		switch kind {
		case "string":
			v = value(must(rdb.Get(ctx, key).Result()))
		case "list":
			items := []any{}
			for _, s := range must(rdb.LRange(ctx, key, 0, -1).Result()) {
				items = append(items, value(s))
			}
			v = items
		case "set":
			members := must(rdb.SMembers(ctx, key).Result())
			sort.Strings(members)
			items := []any{}
			for _, s := range members {
				items = append(items, value(s))
			}
			v = items
		case "zset":
			items := []any{}
			for _, z := range must(rdb.ZRangeWithScores(ctx, key, 0, -1).Result()) {
				items = append(items, []any{value(z.Member.(string)), z.Score})
			}
			v = items
		case "hash":
			fields := map[string]any{}
			for f, s := range must(rdb.HGetAll(ctx, key).Result()) {
				fields[f] = value(s)
			}
			v = fields
		default:
			fail("key %s has type %s, which the dump does not know", key, kind)
		}
		out[key] = map[string]any{"type": kind, "ttl": secs, "value": v}
	}
	return out
}

func redisVersion(ctx context.Context, rdb *redis.Client) string {
	for _, line := range strings.Split(must(rdb.Info(ctx, "server").Result()), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}

var pageAll = asynq.PageSize(10000)

func inspect(opt asynq.RedisClientOpt) map[string]any {
	insp := asynq.NewInspector(opt)
	defer insp.Close()
	queues := must(insp.Queues())
	sort.Strings(queues)
	perQueue := map[string]any{}
	for _, q := range queues {
		today := must(insp.History(q, 1))[0]
		groups := []map[string]any{}
		for _, g := range must(insp.Groups(q)) {
			groups = append(groups, map[string]any{"group": g.Group, "size": g.Size,
				"tasks": tasksJSON(must(insp.ListAggregatingTasks(q, g.Group, pageAll)))})
		}
		perQueue[q] = map[string]any{
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
	servers := []map[string]any{}
	for _, s := range must(insp.Servers()) {
		servers = append(servers, serverJSON(s))
	}
	return map[string]any{"queues": queues, "per_queue": perQueue, "servers": servers,
		"scheduler_entries": schedulerEntries(insp)}
}

func writeJSON(path string, v any) {
	b := must(json.MarshalIndent(v, "", " "))
	must(0, os.WriteFile(path, append(b, '\n'), 0o644))
}

func writeJSONLines(path string, items []map[string]any) {
	var sb strings.Builder
	for _, it := range items {
		sb.Write(must(json.Marshal(it)))
		sb.WriteByte('\n')
	}
	must(0, os.WriteFile(path, []byte(sb.String()), 0o644))
}

func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

func text(b []byte) any {
	if b == nil || !utf8.Valid(b) {
		return nil
	}
	return string(b)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
