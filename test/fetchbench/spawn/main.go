// Command spawn runs a command and writes what it used to file descriptor
// 3: its wall time, user and system CPU in seconds and peak RSS in KiB,
// space-separated on one line. It exits with the command's exit code.
//
// The benchmark starts each tool through it rather than directly: Linux
// starts the peak RSS of a process that execs in a child sharing its
// parent's memory (as Go starts every command) at the parent's, so a tool
// started by the harness would be reported at least at the harness's size.
// This program links little, so the floor it sets is a few MiB.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: spawn command [args...] 3>usage")
		os.Exit(2)
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	// The harness stops a run by signalling the process group, which
	// reaches the command too; this process waits for the command to end.
	// Caught, not ignored: an ignored signal stays ignored in the command.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, err)
		return 127
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		fmt.Fprintln(os.Stderr, "no resource usage")
		return 1
	}
	usage := os.NewFile(3, "usage")
	_, err = fmt.Fprintf(usage, "%.6f %.6f %.6f %d\n", wall.Seconds(),
		time.Duration(ru.Utime.Nano()).Seconds(), time.Duration(ru.Stime.Nano()).Seconds(), ru.Maxrss)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return cmd.ProcessState.ExitCode()
}
