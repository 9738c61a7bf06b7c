package ociimage

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Dockerfile is what the final stage of a Dockerfile says about the image
// Operator builds without it.
type Dockerfile struct {
	// Entrypoint is the final stage's ENTRYPOINT, which must be in exec
	// (JSON) form: the shell form needs a shell the image does not have.
	Entrypoint []string
	User       string
	// WorkingDir is the final stage's last WORKDIR, "" if it has none.
	WorkingDir string
	// Binaries maps each package of Build to where the final stage copies
	// its binary, and Build is the one go build of an earlier stage that
	// made them.
	Binaries map[string]string
	Build    GoBuild
}

// stage is what ParseDockerfile keeps of one FROM ... stage.
type stage struct {
	name       string
	args       map[string]string
	workdir    string
	user       string
	entrypoint []string
	copies     []stageCopy
	builds     []stageBuild
}

type stageCopy struct {
	from    string
	srcs    []string
	dst     string
	workdir string
}

type stageBuild struct {
	build   GoBuild
	workdir string
}

// ParseDockerfile reads a Dockerfile: the final stage's ENTRYPOINT, USER
// and WORKDIR, and which go build of an earlier stage made the binary the
// final stage copies in.
func ParseDockerfile(r io.Reader) (Dockerfile, error) {
	instructions, err := dockerfileInstructions(r)
	if err != nil {
		return Dockerfile{}, err
	}
	var stages []*stage
	for _, in := range instructions {
		if in.keyword == "FROM" {
			st := &stage{args: map[string]string{}}
			fields := strings.Fields(in.rest)
			if n := len(fields); n >= 3 && strings.EqualFold(fields[n-2], "AS") {
				st.name = fields[n-1]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			// Only ARGs for FROM lines may come before the first FROM.
			continue
		}
		st := stages[len(stages)-1]
		if err := st.apply(in); err != nil {
			return Dockerfile{}, fmt.Errorf("Dockerfile line %d: %w", in.line, err)
		}
	}
	if len(stages) == 0 {
		return Dockerfile{}, fmt.Errorf("the Dockerfile has no FROM")
	}
	final := stages[len(stages)-1]
	df := Dockerfile{Entrypoint: final.entrypoint, User: final.user, WorkingDir: final.workdir}

	binaries, build, err := copiedBinaries(final, stages[:len(stages)-1])
	if err != nil {
		return Dockerfile{}, err
	}
	df.Binaries, df.Build = binaries, build
	return df, nil
}

// copiedBinaries maps each package whose binary the final stage copies from
// one of the builders (the earlier stages) to where it goes, and returns
// the one go build that made them all.
func copiedBinaries(final *stage, builders []*stage) (map[string]string, GoBuild, error) {
	var builds []GoBuild
	binaries := map[string]string{}
	for _, c := range final.copies {
		builder := findStage(builders, c.from)
		if builder == nil {
			continue
		}
		for _, b := range builder.builds {
			copied := c.destinations(b)
			if len(copied) == 0 {
				continue
			}
			if !slices.ContainsFunc(builds, b.build.equal) {
				builds = append(builds, b.build)
			}
			for pkg, dst := range copied {
				if other, ok := binaries[pkg]; ok && other != dst {
					return nil, GoBuild{}, fmt.Errorf("the Dockerfile's final stage copies the binary of %s twice, to %s and %s", pkg, other, dst)
				}
				binaries[pkg] = dst
			}
		}
	}
	switch len(builds) {
	case 0:
		return nil, GoBuild{}, fmt.Errorf("the Dockerfile's final stage copies no binary that a go build of an earlier stage makes")
	case 1:
		return binaries, builds[0], nil
	default:
		return nil, GoBuild{}, fmt.Errorf("the Dockerfile's final stage copies the output of %d go builds; the image is made from one", len(builds))
	}
}

// outputs is where b puts each package's binary: at its -o for one
// package, or, when -o is a directory (it ends in a slash) or there are
// several packages, in it under the package's last element, as go build
// names them.
func (b stageBuild) outputs() map[string]string {
	out := b.build.Output
	if out == "" {
		out = "."
	}
	if !path.IsAbs(out) {
		out = path.Join(orRoot(b.workdir), out)
	}
	outs := map[string]string{}
	if len(b.build.Packages) == 1 && !strings.HasSuffix(b.build.Output, "/") && b.build.Output != "" {
		outs[b.build.Packages[0]] = out
		return outs
	}
	for _, pkg := range b.build.Packages {
		outs[pkg] = path.Join(out, path.Base(pkg))
	}
	return outs
}

// destinations maps each package of b whose binary c copies to where c
// puts it.
func (c stageCopy) destinations(b stageBuild) map[string]string {
	dst := c.dst
	if !path.IsAbs(dst) {
		dst = path.Join(orRoot(c.workdir), dst)
	}
	// "." and "dir/" name a directory the files go into, as does any
	// destination of more than one source.
	intoDir := len(c.srcs) > 1 || strings.HasSuffix(c.dst, "/") || c.dst == "." || dst == orRoot(c.workdir)
	copied := map[string]string{}
	for pkg, out := range b.outputs() {
		for _, src := range c.srcs {
			// A COPY --from source is relative to the stage's root, not
			// its WORKDIR.
			if out != path.Join("/", src) {
				continue
			}
			if intoDir {
				copied[pkg] = path.Join(dst, path.Base(src))
			} else {
				copied[pkg] = dst
			}
		}
	}
	return copied
}

func orRoot(dir string) string {
	if dir == "" {
		return "/"
	}
	return dir
}

// findStage is the stage that COPY --from=ref means: a stage's name or
// its index.
func findStage(stages []*stage, ref string) *stage {
	if ref == "" {
		return nil
	}
	for _, st := range stages {
		if st.name != "" && strings.EqualFold(st.name, ref) {
			return st
		}
	}
	if i, err := strconv.Atoi(ref); err == nil && i >= 0 && i < len(stages) {
		return stages[i]
	}
	return nil
}

func (st *stage) apply(in instruction) error {
	switch in.keyword {
	case "ARG":
		name, value, _ := strings.Cut(strings.TrimSpace(in.rest), "=")
		st.args[name] = strings.Trim(value, `"`)
	case "WORKDIR":
		dir, err := st.expand(strings.TrimSpace(in.rest))
		if err != nil {
			return err
		}
		if !path.IsAbs(dir) {
			dir = path.Join(orRoot(st.workdir), dir)
		}
		st.workdir = path.Clean(dir)
	case "USER":
		user, err := st.expand(strings.TrimSpace(in.rest))
		if err != nil {
			return err
		}
		st.user = user
	case "ENTRYPOINT":
		var argv []string
		if err := json.Unmarshal([]byte(in.rest), &argv); err != nil {
			return fmt.Errorf("ENTRYPOINT %s is not in exec form (a JSON array): %w", in.rest, err)
		}
		st.entrypoint = argv
	case "COPY":
		c := stageCopy{workdir: st.workdir}
		words := strings.Fields(in.rest)
		for len(words) > 0 && strings.HasPrefix(words[0], "--") {
			if from, ok := strings.CutPrefix(words[0], "--from="); ok {
				c.from = from
			}
			words = words[1:]
		}
		if len(words) < 2 {
			return fmt.Errorf("COPY %s has no source or no destination", in.rest)
		}
		c.srcs, c.dst = words[:len(words)-1], words[len(words)-1]
		st.copies = append(st.copies, c)
	case "RUN":
		if !strings.Contains(in.rest, "go build") {
			return nil
		}
		cmds, err := splitShell(in.rest, st.args)
		if err != nil {
			return err
		}
		for _, words := range cmds {
			goAt := slices.Index(words, "go")
			if goAt < 0 || goAt+1 >= len(words) || words[goAt+1] != "build" {
				continue
			}
			b, err := ParseGoBuild(words)
			if err != nil {
				return err
			}
			st.builds = append(st.builds, stageBuild{build: b, workdir: st.workdir})
		}
	}
	return nil
}

// expand replaces $NAME and ${NAME} in an instruction's argument, as the
// Dockerfile frontend does with the stage's ARGs.
func (st *stage) expand(s string) (string, error) {
	cmds, err := splitShell(s, st.args)
	if err != nil {
		return "", err
	}
	if len(cmds) != 1 || len(cmds[0]) != 1 {
		return "", fmt.Errorf("%q is not one word", s)
	}
	return cmds[0][0], nil
}

type instruction struct {
	line    int
	keyword string
	rest    string
}

// dockerfileInstructions joins continued lines and drops comments: one
// instruction for each FROM, RUN, COPY ....
func dockerfileInstructions(r io.Reader) ([]instruction, error) {
	var (
		out     []instruction
		pending strings.Builder
		start   int
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if pending.Len() == 0 {
			start = n
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending.WriteString(cont)
			pending.WriteString(" ")
			continue
		}
		pending.WriteString(line)
		text := pending.String()
		pending.Reset()
		keyword, rest := text, ""
		if i := strings.IndexAny(text, " \t"); i >= 0 {
			keyword, rest = text[:i], text[i+1:]
		}
		out = append(out, instruction{line: start, keyword: strings.ToUpper(keyword), rest: strings.TrimSpace(rest)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the Dockerfile: %w", err)
	}
	if pending.Len() > 0 {
		return nil, fmt.Errorf("the Dockerfile ends in a continued line (from line %d)", start)
	}
	return out, nil
}
