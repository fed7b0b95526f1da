//go:build !asynq_v024

package main

import "github.com/hibiken/asynq"

// Before asynq v0.24.0 a Scheduler has no PostEnqueueFunc: only failed enqueues can be reported.
func onSchedulerEnqueue(opts *asynq.SchedulerOpts, done func(info *asynq.TaskInfo, err error)) {
	opts.EnqueueErrorHandler = func(_ *asynq.Task, _ []asynq.Option, err error) { done(nil, err) }
}
