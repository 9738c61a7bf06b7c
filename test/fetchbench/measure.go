package main

import (
	"context"
	"fmt"
	"io"
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
	// ServerCPU is the CPU time the S3 server used during the run: with
	// CPUSeconds, what the copy cost the machine.
	ServerCPU float64 `json:"serverCpuSeconds"`
	// CgroupPeakMiB is the most memory the tool's cgroup was charged,
	// its writes in the page cache included (-memory-max; 0 without).
	CgroupPeakMiB float64 `json:"cgroupPeakMiB,omitempty"`
}

// measure runs args with env added to a bare PATH and HOME, its output to
// logPath, through the spawn program (./spawn), which reports the
// command's wall time, CPU time and peak resident set from the rusage the
// kernel gives it when the command exits. A non-zero exit is an error
// naming the log.
func measure(ctx context.Context, spawn string, args, env []string, home, logPath string) (sample, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return sample{}, err
	}
	defer func() { _ = logFile.Close() }()
	usageR, usageW, err := os.Pipe()
	if err != nil {
		return sample{}, err
	}
	defer func() { _ = usageR.Close() }()
	cmd := exec.CommandContext(ctx, spawn, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = []*os.File{usageW} // its file descriptor 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Start()
	_ = usageW.Close()
	if err != nil {
		return sample{}, err
	}
	line, readErr := io.ReadAll(usageR)
	if err := cmd.Wait(); err != nil {
		return sample{}, fmt.Errorf("%s: %w (log: %s)", args[0], err, logPath)
	}
	var wall, user, sys float64
	var maxRSSKiB int64
	if _, err := fmt.Sscan(string(line), &wall, &user, &sys, &maxRSSKiB); err != nil || readErr != nil {
		return sample{}, fmt.Errorf("%s: no resource usage from %s: %q", args[0], spawn, line)
	}
	return sample{
		Seconds:    round(wall),
		UserCPU:    round(user),
		SysCPU:     round(sys),
		CPUSeconds: round(user + sys),
		PeakRSSMiB: round(float64(maxRSSKiB) / kib),
	}, nil
}
