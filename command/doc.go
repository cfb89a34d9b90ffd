// Package command runs the programs of a probe point that rdmaprobe did
// not write: a server under test started from an operator's argv
// template, rebuilt per client count when asked, and client commands run
// once per client.
//
// It holds the parts that do not depend on where a point runs:
//
//   - template.go: argv templates ({n}, {port}, …) split without a shell
//     and expanded with unknown placeholders refused, printf escapes;
//   - proc.go: a process in its own process group, its output kept as a
//     bounded tail and watched line by line for a regexp, stopped with
//     SIGTERM then SIGKILL, every member of its tree reaped;
//   - ready.go: readiness observed (a port listening, a line printed),
//     never slept for, and a fixed port seen free again;
//   - outcome.go: what a client command did, as a class;
//   - errno.go: errno names found in a program's output;
//   - build.go: a build run once per distinct input, cached by the client
//     count and the content of what it reads.
//
// Every process started here is waited for. A process that daemonizes
// or leaves children behind is still found: the first Start makes this
// process a child subreaper (PR_SET_CHILD_SUBREAPER), so orphans of a
// target are re-parented here rather than to init, and Stop reaps them.
package command
