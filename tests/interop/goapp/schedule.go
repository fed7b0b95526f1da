package main

import (
	"flag"
	"time"

	"github.com/hibiken/asynq"
)

// scheduleFlags configure one entry of a Go asynq.Scheduler run for a while.
type scheduleFlags struct {
	spec, taskType, payload, queue, location string
	maxRetry                                 int
	duration                                 time.Duration
}

// runSchedule runs a Go asynq.Scheduler with one entry for --duration, printing {"event":"registered","id":...}
// at start and {"event":"enqueued","task_id":...} for each enqueue. Shutdown removes its entries, as Go does.
func runSchedule(fs *flag.FlagSet, common *commonFlags, args []string) {
	var f scheduleFlags
	fs.StringVar(&f.spec, "spec", "@every 1s", "cron spec")
	fs.StringVar(&f.taskType, "type", "go:cron", "task type")
	fs.StringVar(&f.payload, "payload", "", "task payload")
	fs.StringVar(&f.queue, "queue", "default", "queue")
	fs.StringVar(&f.location, "location", "UTC", "IANA time zone of the spec")
	fs.IntVar(&f.maxRetry, "max-retry", -1, "MaxRetry option (-1: not given)")
	fs.DurationVar(&f.duration, "duration", 12*time.Second, "how long to run")
	fs.Parse(args)
	loc, err := time.LoadLocation(f.location)
	if err != nil {
		fail("location: %v", err)
	}
	s := asynq.NewScheduler(common.connOpt(), &asynq.SchedulerOpts{
		Location: loc,
		LogLevel: asynq.WarnLevel,
		PostEnqueueFunc: func(info *asynq.TaskInfo, err error) {
			if err != nil {
				emit(map[string]any{"event": "enqueue_error", "error": err.Error()})
				return
			}
			emit(map[string]any{"event": "enqueued", "task_id": info.ID, "queue": info.Queue})
		},
	})
	opts := []asynq.Option{asynq.Queue(f.queue)}
	if f.maxRetry >= 0 {
		opts = append(opts, asynq.MaxRetry(f.maxRetry))
	}
	id, err := s.Register(f.spec, asynq.NewTask(f.taskType, []byte(f.payload)), opts...)
	if err != nil {
		fail("register: %v", err)
	}
	emit(map[string]any{"event": "registered", "id": id})
	if err := s.Start(); err != nil {
		fail("start: %v", err)
	}
	time.Sleep(f.duration)
	s.Shutdown()
}
