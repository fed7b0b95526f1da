//go:build asynq_v026

package main

import "github.com/hibiken/asynq"

// Task headers came with asynq v0.26.0.
const hasHeaders = true

func newTask(typ string, payload []byte, headers map[string]string) (*asynq.Task, error) {
	if headers != nil {
		return asynq.NewTaskWithHeaders(typ, payload, headers), nil
	}
	return asynq.NewTask(typ, payload), nil
}

func taskHeaders(t *asynq.Task) map[string]string { return t.Headers() }

func infoHeaders(t *asynq.TaskInfo) map[string]string { return t.Headers }
