//go:build !asynq_v026

package main

import (
	"errors"

	"github.com/hibiken/asynq"
)

// Before asynq v0.26.0 tasks have no headers: a spec asking for them fails, and none are reported.
const hasHeaders = false

func newTask(typ string, payload []byte, headers map[string]string) (*asynq.Task, error) {
	if headers != nil {
		return nil, errors.New("task headers need asynq v0.26.0 or later")
	}
	return asynq.NewTask(typ, payload), nil
}

func taskHeaders(*asynq.Task) map[string]string { return nil }

func infoHeaders(*asynq.TaskInfo) map[string]string { return nil }
