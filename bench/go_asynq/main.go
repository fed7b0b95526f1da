// Command goasynq is the Go asynq side of the asynqpy benchmark (bench/run.py).
//
// It uses the released github.com/hibiken/asynq v0.26.0 with its default settings and speaks to
// the benchmark through Redis keys shared with the Python adapters (bench/adapters/base.py):
//
//	goasynq enqueue -redis URL -n N -mode single|concurrent [-c 10] [-kind x]
//	    enqueue N no-op tasks one by one, or from -c goroutines (v0.26.0 has no batch API);
//	    prints {"n":..,"seconds":..,"rate":..}
//	goasynq worker -redis URL [-n N] [-c 10]
//	    an asynq.Server (concurrency -c, queue "default") whose handler records what the
//	    benchmark measures; stops on SIGTERM
//	goasynq pickup -redis URL -samples S
//	    enqueues S tasks carrying their enqueue time, 25-75 ms apart
//	goasynq delayed -redis URL < dues
//	    enqueues one task per due time (Unix seconds, one per line on stdin) with ProcessAt
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

const (
	taskType    = "bench:noop"
	keyFirst    = "bench:first"
	keyProgress = "bench:progress"
	keyPickup   = "bench:pickup"
	keyLate     = "bench:late"
	keyWarm     = "bench:warm"
)

// payload is the JSON every benchmark task carries: k = kind (d drain, p pickup, l late, w warm-up,
// x enqueue-only), t = enqueue time (pickup) or due time (late), Unix seconds.
type payload struct {
	K string  `json:"k"`
	T float64 `json:"t"`
}

func unixNow() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "goasynq: "+format+"\n", args...)
	os.Exit(1)
}

func newTask(kind string, t float64) *asynq.Task {
	b, err := json.Marshal(payload{K: kind, T: t})
	if err != nil {
		fail("marshal: %v", err)
	}
	return asynq.NewTask(taskType, b)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: goasynq enqueue|worker|pickup|delayed [flags]")
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	url := fs.String("redis", "redis://127.0.0.1:6379/0", "Redis URL")
	defaultN, _ := strconv.Atoi(os.Getenv("BENCH_N")) // the worker gets its drain count from the driver's env
	if defaultN <= 0 {
		defaultN = 1000
	}
	n := fs.Int("n", defaultN, "number of tasks (worker: drain count, default $BENCH_N)")
	mode := fs.String("mode", "single", "enqueue mode: single or concurrent")
	conc := fs.Int("c", 10, "goroutines (enqueue) or worker concurrency")
	kind := fs.String("kind", "x", "payload kind of enqueued tasks")
	samples := fs.Int("samples", 200, "pickup samples")
	queues := fs.String("queues", "default", "worker: comma-separated queues, each of priority 1")
	_ = fs.Parse(os.Args[2:])
	opt, err := asynq.ParseRedisURI(*url)
	if err != nil {
		fail("redis url: %v", err)
	}
	switch cmd {
	case "enqueue":
		enqueue(opt, *n, *mode, *conc, *kind)
	case "worker":
		worker(opt, *n, *conc, *queues)
	case "pickup":
		pickup(opt, *samples)
	case "delayed":
		delayed(opt)
	default:
		fail("unknown command %q", cmd)
	}
}

func enqueue(opt asynq.RedisConnOpt, n int, mode string, conc int, kind string) {
	client := asynq.NewClient(opt)
	defer client.Close()
	tasks := make([]*asynq.Task, n)
	for i := range tasks {
		tasks[i] = newTask(kind, 0)
	}
	start := time.Now()
	switch mode {
	case "single":
		for _, t := range tasks {
			if _, err := client.Enqueue(t); err != nil {
				fail("enqueue: %v", err)
			}
		}
	case "concurrent":
		var next int64 = -1
		var wg sync.WaitGroup
		var firstErr atomic.Value
		for g := 0; g < conc; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := atomic.AddInt64(&next, 1)
					if i >= int64(n) {
						return
					}
					if _, err := client.Enqueue(tasks[i]); err != nil {
						firstErr.CompareAndSwap(nil, err.Error())
						return
					}
				}
			}()
		}
		wg.Wait()
		if e := firstErr.Load(); e != nil {
			fail("enqueue: %v", e)
		}
	default:
		fail("unknown mode %q", mode)
	}
	secs := time.Since(start).Seconds()
	out, _ := json.Marshal(map[string]float64{"n": float64(n), "seconds": secs, "rate": float64(n) / secs})
	fmt.Println(string(out))
}

// recorder writes what the Python side reads: the first drain task's start, drain progress as a
// zset (score = count, so a late writer never hides a newer count), pickup and lateness samples.
type recorder struct {
	rdb   redis.UniversalClient
	n     int64
	count atomic.Int64
}

func (r *recorder) handle(ctx context.Context, t *asynq.Task) error {
	start := unixNow()
	var p payload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return err
	}
	switch p.K {
	case "d":
		c := r.count.Add(1)
		if c == 1 {
			r.rdb.Set(ctx, keyFirst, strconv.FormatFloat(start, 'f', -1, 64), 0)
		}
		if c%100 == 0 || c >= r.n {
			member := fmt.Sprintf("%d %s", c, strconv.FormatFloat(unixNow(), 'f', -1, 64))
			r.rdb.ZAdd(ctx, keyProgress, redis.Z{Score: float64(c), Member: member})
		}
	case "p", "l":
		key := keyPickup
		if p.K == "l" {
			key = keyLate
		}
		r.rdb.RPush(ctx, key, strconv.FormatFloat(start-p.T, 'f', -1, 64))
	case "w":
		r.rdb.RPush(ctx, keyWarm, "1")
	}
	return nil
}

func worker(opt asynq.RedisConnOpt, n int, conc int, queues string) {
	rdb, ok := opt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		fail("unexpected redis client type")
	}
	rec := &recorder{rdb: rdb, n: int64(n)}
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency: conc,
		Queues:      queueMap(queues),
		LogLevel:    asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(taskType, rec.handle)
	if err := srv.Run(mux); err != nil {
		fail("server: %v", err)
	}
}

func queueMap(names string) map[string]int {
	m := map[string]int{}
	for _, q := range strings.Split(names, ",") {
		if q = strings.TrimSpace(q); q != "" {
			m[q] = 1
		}
	}
	return m
}

func pickup(opt asynq.RedisConnOpt, samples int) {
	client := asynq.NewClient(opt)
	defer client.Close()
	next := time.Now()
	for i := 0; i < samples; i++ {
		next = next.Add(time.Duration(25+rand.Intn(51)) * time.Millisecond)
		time.Sleep(time.Until(next))
		if _, err := client.Enqueue(newTask("p", unixNow())); err != nil {
			fail("enqueue: %v", err)
		}
	}
}

func delayed(opt asynq.RedisConnOpt) {
	client := asynq.NewClient(opt)
	defer client.Close()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		due, err := strconv.ParseFloat(line, 64)
		if err != nil {
			fail("due time %q: %v", line, err)
		}
		sec, frac := math.Modf(due)
		at := time.Unix(int64(sec), int64(frac*1e9))
		if _, err := client.Enqueue(newTask("l", due), asynq.ProcessAt(at)); err != nil {
			fail("enqueue: %v", err)
		}
	}
}
