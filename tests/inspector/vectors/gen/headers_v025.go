//go:build asynq025

package main

import "github.com/hibiken/asynq"

// asynq v0.25.x has no task headers: the t-opts task is left out and every task reports none.
const hasHeaders = false

func newTaskWithHeaders(typ string, payload []byte, _ map[string]string) *asynq.Task {
	return asynq.NewTask(typ, payload)
}

func taskHeaders(*asynq.TaskInfo) map[string]string { return nil }
