//go:build asynq_v024

package main

import "github.com/hibiken/asynq"

// SchedulerOpts.PostEnqueueFunc (called after every enqueue, with its result) came with asynq v0.24.0.
func onSchedulerEnqueue(opts *asynq.SchedulerOpts, done func(info *asynq.TaskInfo, err error)) {
	opts.PostEnqueueFunc = done
}
