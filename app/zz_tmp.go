package app

import (
	"context"
	"errors"
)

func verbsBinary(ctx context.Context) (string, error) { return "", errors.New("no verbs") }
