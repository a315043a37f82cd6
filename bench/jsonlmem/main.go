// Command jsonlmem measures the memory of engine --jsonl over large files:
// it writes JSONL files of artifact-shaped lines (a few of them over the
// size limit), runs the engine on each, and reports the peak resident set
// size beside the file size. Constant memory means the peak does not grow
// with the file.
//
//	go build -o /tmp/engine ./cmd/engine
//	go run ./bench/jsonlmem -engine /tmp/engine -sizes 100MB,1GB
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

func main() {
	engine := flag.String("engine", "engine", "path of the engine binary")
	sizes := flag.String("sizes", "100MB,1GB", "comma-separated file sizes (MB or GB, decimal)")
	dir := flag.String("dir", os.TempDir(), "where to write the files")
	command := flag.String("command", "id", "engine command to run with --jsonl")
	keep := flag.Bool("keep", false, "keep the generated files")
	flag.Parse()

	fmt.Printf("%-8s %-10s %-12s %-10s %-12s %s\n", "file", "lines", "results", "seconds", "MB/s", "max RSS")
	for _, s := range strings.Split(*sizes, ",") {
		n, err := parseSize(s)
		if err != nil {
			log.Fatal(err)
		}
		path := filepath.Join(*dir, "parley-jsonl-"+s+".jsonl")
		lines, err := write(path, n)
		if err != nil {
			log.Fatal(err)
		}
		results, secs, rss, err := run(*engine, *command, path)
		if !*keep {
			os.Remove(path)
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-8s %-10d %-12d %-10.1f %-12.0f %.1f MiB\n", s, lines, results, secs, float64(n)/1e6/secs, float64(rss)/1024)
	}
}

func parseSize(s string) (int64, error) {
	mult := int64(1e6)
	switch {
	case strings.HasSuffix(s, "GB"):
		mult, s = 1e9, strings.TrimSuffix(s, "GB")
	case strings.HasSuffix(s, "MB"):
		s = strings.TrimSuffix(s, "MB")
	default:
		return 0, fmt.Errorf("size %q: want MB or GB", s)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v * mult, err
}

// write fills path with about n bytes of lines: artifact-shaped documents
// of varied length, unsorted members, and one line in 10,000 over 1 MiB.
func write(path string, n int64) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var written, lines int64
	big := `{"payload":{"statement":"` + strings.Repeat("x", 1<<20) + `"}}` + "\n"
	for written < n {
		var line string
		if lines%10000 == 9999 {
			line = big
		} else {
			line = fmt.Sprintf(`{"references":[],"protocol_version":"0.1","payload":{"statement":"claim %d: %s"},"artifact_type":"CLAIM"}`+"\n",
				lines, strings.Repeat("latency stays bounded under load ", 1+int(lines%40)))
		}
		w.WriteString(line)
		written += int64(len(line))
		lines++
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return lines, f.Close()
}

// run runs the engine over path and returns the number of result lines, the
// seconds taken and the peak RSS in KiB.
func run(engine, command, path string) (int64, float64, int64, error) {
	cmd := exec.Command(engine, command, "--jsonl", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	// Peak RSS: the kernel's VmHWM of the process since its exec, polled
	// while it runs. (The rusage of a waited child would also count the
	// moments between fork and exec, when it shares this process's memory.)
	var hwm atomic.Int64
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if kb := vmHWM(cmd.Process.Pid); kb > hwm.Load() {
				hwm.Store(kb)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	var results int64
	r := bufio.NewReaderSize(out, 1<<20)
	for {
		_, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, 0, err
		}
		results++
	}
	close(stop)
	<-polled
	err = cmd.Wait()
	secs := time.Since(start).Seconds()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		err = nil // some lines are rejected on purpose
	}
	return results, secs, hwm.Load(), err
}

// vmHWM reads the peak resident set size, in KiB, from /proc.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
