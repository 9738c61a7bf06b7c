package ociimage

import (
	"fmt"
	"strings"
)

// splitShell splits a RUN line into commands (at unquoted &&, ||, ; and |)
// of words, as sh would, expanding $NAME and ${NAME} from vars outside
// single quotes. It knows only what Dockerfiles use to call go build: a
// variable that vars lacks, ${NAME:-...} and the like, $(...) and
// backquotes are errors rather than guesses.
func splitShell(line string, vars map[string]string) ([][]string, error) {
	var (
		cmds    [][]string
		words   []string
		word    strings.Builder
		inWord  bool
		single  bool
		double  bool
		endWord = func() {
			if inWord {
				words = append(words, word.String())
			}
			word.Reset()
			inWord = false
		}
		endCmd = func() {
			endWord()
			if len(words) > 0 {
				cmds = append(cmds, words)
			}
			words = nil
		}
	)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case single:
			if c == '\'' {
				single = false
			} else {
				word.WriteByte(c)
			}
		case c == '\'' && !double:
			single, inWord = true, true
		case c == '"':
			double, inWord = !double, true
		case c == '\\':
			if i+1 == len(line) {
				return nil, fmt.Errorf("%q ends in a backslash", line)
			}
			next := line[i+1]
			// In double quotes a backslash escapes only these.
			if double && !strings.ContainsRune("\"\\$`", rune(next)) {
				word.WriteByte(c)
			}
			word.WriteByte(next)
			i++
			inWord = true
		case c == '$':
			value, n, err := expandVar(line, i, vars)
			if err != nil {
				return nil, err
			}
			word.WriteString(value)
			i += n
			inWord = true
		case c == '`':
			return nil, fmt.Errorf("%q: command substitution is not supported", line)
		case double:
			word.WriteByte(c)
		case c == ' ' || c == '\t' || c == '\n':
			endWord()
		case c == ';' || c == '|' || c == '&':
			n, err := controlOperator(line, i)
			if err != nil {
				return nil, err
			}
			i += n - 1
			endCmd()
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if single || double {
		return nil, fmt.Errorf("%q has an unclosed quote", line)
	}
	endCmd()
	return cmds, nil
}

// expandVar is the value of the variable named after the $ at line[i],
// and how many bytes the name took.
func expandVar(line string, i int, vars map[string]string) (string, int, error) {
	name, n, err := shellVarName(line[i+1:])
	if err != nil {
		return "", 0, fmt.Errorf("%q: %w", line, err)
	}
	value, ok := vars[name]
	if !ok {
		return "", 0, fmt.Errorf("%q uses $%s, which no ARG of its stage sets", line, name)
	}
	return value, n, nil
}

// controlOperator is how many bytes the operator at line[i] (;, |, &)
// takes: 2 for && and ||. A lone & would run a command in the
// background, which is an error.
func controlOperator(line string, i int) (int, error) {
	c := line[i]
	if c == '&' && (i+1 == len(line) || line[i+1] != '&') {
		return 0, fmt.Errorf("%q: a background command is not supported", line)
	}
	if (c == '&' || c == '|') && i+1 < len(line) && line[i+1] == c {
		return 2, nil
	}
	return 1, nil
}

// shellVarName reads the name after a $: NAME or {NAME}, returning how
// many bytes it took.
func shellVarName(s string) (string, int, error) {
	isNameByte := func(c byte, first bool) bool {
		return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || !first && c >= '0' && c <= '9'
	}
	if strings.HasPrefix(s, "{") {
		end := strings.IndexByte(s, '}')
		if end < 0 {
			return "", 0, fmt.Errorf("${ without }")
		}
		name := s[1:end]
		for i := 0; i < len(name); i++ {
			if !isNameByte(name[i], i == 0) {
				return "", 0, fmt.Errorf("${%s} is not a plain variable", name)
			}
		}
		if name == "" {
			return "", 0, fmt.Errorf("${} has no name")
		}
		return name, end + 1, nil
	}
	n := 0
	for n < len(s) && isNameByte(s[n], n == 0) {
		n++
	}
	if n == 0 {
		return "", 0, fmt.Errorf("$ not followed by a variable name")
	}
	return s[:n], n, nil
}
