// Package guestsuites holds one test, TestGuestSuites, that builds the
// tests of the packages which need an RDMA device and runs them inside the
// Soft-RoCE guest. It sits apart from the app package's tests so that
// `go test ./...` runs it beside them rather than after them.
package guestsuites
