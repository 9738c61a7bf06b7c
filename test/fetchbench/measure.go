package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// sample is one run of a tool on a shape.
type sample struct {
	Run     int     `json:"run"`
	Seconds float64 `json:"seconds"`
	MiBps   float64 `json:"mibPerSecond"`
	// SyncSeconds is how long a sync(2) right after the tool's exit took:
	// what the copy still needed to be on disk. DurableSeconds is the sum.
	SyncSeconds    float64 `json:"syncSeconds"`
	DurableSeconds float64 `json:"durableSeconds"`
	UserCPU        float64 `json:"userCpuSeconds"`
	SysCPU         float64 `json:"sysCpuSeconds"`
	CPUSeconds     float64 `json:"cpuSeconds"`
	PeakRSSMiB     float64 `json:"peakRssMiB"`
}

// measure runs args with env added to a bare PATH and HOME, its output to
// logPath, and returns its wall time, CPU time and peak resident set from
// the rusage the kernel reports when it exits. A non-zero exit is an
// error naming the log.
func measure(ctx context.Context, args, env []string, home, logPath string) (sample, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return sample{}, err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w (log: %s)", args[0], err, logPath)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return sample{}, fmt.Errorf("%s: no resource usage", args[0])
	}
	user := time.Duration(ru.Utime.Nano()).Seconds()
	sys := time.Duration(ru.Stime.Nano()).Seconds()
	return sample{
		Seconds:    round(wall.Seconds()),
		UserCPU:    round(user),
		SysCPU:     round(sys),
		CPUSeconds: round(user + sys),
		PeakRSSMiB: round(float64(ru.Maxrss) / kib), // Linux reports KiB
	}, nil
}
