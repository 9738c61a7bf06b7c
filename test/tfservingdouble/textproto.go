package main

// A reader of the protobuf text format, driven by a schema of the few
// messages TF Serving reads from files. TF Serving refuses a file its
// protobuf library cannot parse into the message, so this reader is
// strict where that library is: unknown fields, a non-repeated field set
// twice, two members of a oneof, a value of the wrong type or out of
// range, invalid UTF-8 in a string. It accepts what that library accepts
// besides: # comments, either quote, adjacent strings, escapes, hex and
// octal integers, ':' before a message, <...> as well as {...}, list
// syntax for repeated fields, and ',' or ';' after a field.

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

type pbKind int

const (
	pbString pbKind = iota
	pbInt64
	pbUint32
	pbBool
	pbEnum
	pbMessage
)

// pbField describes one field of a message.
type pbField struct {
	name     string
	kind     pbKind
	repeated bool
	message  *pbType  // pbMessage
	enum     []string // pbEnum: the value names, by number
	oneof    string
	// refuse is set for a real field the double does not support: the
	// file is refused with this reason rather than half understood.
	refuse string
}

// pbType describes a message.
type pbType struct {
	name   string // the full protobuf name, as errors show it
	fields []*pbField
}

func (t *pbType) field(name string) *pbField {
	for _, f := range t.fields {
		if f.name == name {
			return f
		}
	}
	return nil
}

// pbPos is a place in the text, 1-based.
type pbPos struct{ line, col int }

func (p pbPos) errorf(format string, args ...any) error {
	return fmt.Errorf("%d:%d: %s", p.line, p.col, fmt.Sprintf(format, args...))
}

// pbValue is one value of a field: str for strings, num for integers,
// booleans (0 or 1) and enums (the number), msg for messages.
type pbValue struct {
	pos pbPos
	str string
	num int64
	msg *pbMsg
}

// pbMsg is a parsed message. An absent field reads as its zero value.
type pbMsg struct {
	typ    *pbType
	fields map[string][]pbValue
	order  []string
}

func (m *pbMsg) has(name string) bool       { return len(m.fields[name]) > 0 }
func (m *pbMsg) list(name string) []pbValue { return m.fields[name] }

func (m *pbMsg) first(name string) pbValue {
	if v := m.fields[name]; len(v) > 0 {
		return v[0]
	}
	return pbValue{}
}

func (m *pbMsg) str(name string) string { return m.first(name).str }
func (m *pbMsg) num(name string) int64  { return m.first(name).num }
func (m *pbMsg) sub(name string) *pbMsg { return m.first(name).msg }

func (m *pbMsg) add(f *pbField, pos pbPos, values []pbValue) error {
	if !f.repeated && (m.has(f.name) || len(values) != 1) {
		return pos.errorf("Non-repeated field %q is specified multiple times.", f.name)
	}
	if f.oneof != "" {
		for _, other := range m.order {
			if o := m.typ.field(other); o != f && o.oneof == f.oneof {
				return pos.errorf("Field %q is specified along with field %q, another member of oneof %q.", f.name, other, f.oneof)
			}
		}
	}
	if !m.has(f.name) {
		m.order = append(m.order, f.name)
	}
	m.fields[f.name] = append(m.fields[f.name], values...)
	return nil
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokInt
	tokFloat
	tokString
	tokSymbol
)

type token struct {
	kind tokKind
	text string // a string token's decoded value; any other token as written
	pos  pbPos
}

func (t token) String() string {
	switch t.kind {
	case tokEOF:
		return "end of input"
	case tokString:
		return strconv.Quote(t.text)
	default:
		return t.text
	}
}

type lexer struct {
	src       string
	off       int
	line, col int
}

func (lx *lexer) pos() pbPos { return pbPos{lx.line, lx.col} }

func (lx *lexer) step() {
	if lx.src[lx.off] == '\n' {
		lx.line++
		lx.col = 1
	} else {
		lx.col++
	}
	lx.off++
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentPart(c byte) bool  { return isIdentStart(c) || isDigit(c) }

var (
	hexInt   = regexp.MustCompile(`^0[xX][0-9a-fA-F]+$`)
	octalInt = regexp.MustCompile(`^0[0-7]*$`)
	badOctal = regexp.MustCompile(`^0[0-9]+$`)
	decInt   = regexp.MustCompile(`^[1-9][0-9]*$`)
	floatLit = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?[fF]?$`)
)

func (lx *lexer) next() (token, error) {
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' {
			lx.step()
			continue
		}
		if c == '#' {
			for lx.off < len(lx.src) && lx.src[lx.off] != '\n' {
				lx.step()
			}
			continue
		}
		break
	}
	start := lx.pos()
	if lx.off >= len(lx.src) {
		return token{kind: tokEOF, pos: start}, nil
	}
	c := lx.src[lx.off]
	switch {
	case isIdentStart(c):
		from := lx.off
		for lx.off < len(lx.src) && isIdentPart(lx.src[lx.off]) {
			lx.step()
		}
		return token{kind: tokIdent, text: lx.src[from:lx.off], pos: start}, nil
	case isDigit(c) || c == '.' && lx.off+1 < len(lx.src) && isDigit(lx.src[lx.off+1]):
		return lx.number(start)
	case c == '"' || c == '\'':
		return lx.quoted(start)
	case c < 0x20 || c >= 0x7f:
		return token{}, start.errorf("Invalid character %q outside a string.", rune(c))
	default:
		lx.step()
		return token{kind: tokSymbol, text: string(c), pos: start}, nil
	}
}

func (lx *lexer) number(start pbPos) (token, error) {
	from := lx.off
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		prev := lx.src[lx.off-1]
		exponentSign := (c == '+' || c == '-') && (prev == 'e' || prev == 'E') && !strings.HasPrefix(strings.ToLower(lx.src[from:lx.off]), "0x")
		if !isIdentPart(c) && c != '.' && !exponentSign {
			break
		}
		lx.step()
	}
	text := lx.src[from:lx.off]
	switch {
	case hexInt.MatchString(text), octalInt.MatchString(text), decInt.MatchString(text):
		return token{kind: tokInt, text: text, pos: start}, nil
	case badOctal.MatchString(text):
		return token{}, start.errorf("Numbers starting with leading zero must be in octal: %s", text)
	case floatLit.MatchString(text):
		return token{kind: tokFloat, text: text, pos: start}, nil
	}
	return token{}, start.errorf("Invalid number: %s", text)
}

func (lx *lexer) quoted(start pbPos) (token, error) {
	quote := lx.src[lx.off]
	lx.step()
	var b strings.Builder
	for {
		if lx.off >= len(lx.src) {
			return token{}, start.errorf("Unexpected end of string.")
		}
		c := lx.src[lx.off]
		switch c {
		case quote:
			lx.step()
			return token{kind: tokString, text: b.String(), pos: start}, nil
		case '\n':
			return token{}, lx.pos().errorf("String literals cannot cross line boundaries.")
		case '\\':
			if err := lx.escape(&b); err != nil {
				return token{}, err
			}
		default:
			b.WriteByte(c)
			lx.step()
		}
	}
}

func (lx *lexer) escape(b *strings.Builder) error {
	at := lx.pos()
	lx.step()
	if lx.off >= len(lx.src) {
		return at.errorf("Unexpected end of string.")
	}
	c := lx.src[lx.off]
	lx.step()
	digits := func(max int, ok func(byte) bool) string {
		from := lx.off
		for lx.off < len(lx.src) && lx.off-from < max && ok(lx.src[lx.off]) {
			lx.step()
		}
		return lx.src[from:lx.off]
	}
	isOctal := func(c byte) bool { return c >= '0' && c <= '7' }
	isHex := func(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
	switch c {
	case 'n':
		b.WriteByte('\n')
	case 't':
		b.WriteByte('\t')
	case 'r':
		b.WriteByte('\r')
	case 'a':
		b.WriteByte('\a')
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'v':
		b.WriteByte('\v')
	case '\\', '\'', '"', '?':
		b.WriteByte(c)
	case '0', '1', '2', '3', '4', '5', '6', '7':
		text := string(c) + digits(2, isOctal)
		n, _ := strconv.ParseUint(text, 8, 16)
		if n > 0xff {
			return at.errorf("Octal escape \\%s is out of range.", text)
		}
		b.WriteByte(byte(n))
	case 'x', 'X':
		text := digits(2, isHex)
		if text == "" {
			return at.errorf("Expected hex digits for escape sequence.")
		}
		n, _ := strconv.ParseUint(text, 16, 8)
		b.WriteByte(byte(n))
	case 'u', 'U':
		want := 4
		if c == 'U' {
			want = 8
		}
		text := digits(want, isHex)
		n, _ := strconv.ParseUint(text, 16, 32)
		if len(text) != want || n > utf8.MaxRune || n >= 0xd800 && n <= 0xdfff {
			return at.errorf("Invalid \\%c escape sequence.", c)
		}
		b.WriteRune(rune(n))
	default:
		return at.errorf("Invalid escape sequence in string literal.")
	}
	return nil
}

// maxNesting bounds recursion: TF Serving's configs are a few levels deep.
const maxNesting = 64

type pbParser struct {
	lx    lexer
	tok   token
	depth int
}

// parseTextProto parses src as a message of type typ. Errors are
// "line:col: reason".
func parseTextProto(src string, typ *pbType) (*pbMsg, error) {
	p := &pbParser{lx: lexer{src: src, line: 1, col: 1}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return p.message(typ, "")
}

func (p *pbParser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *pbParser) is(symbol string) bool {
	return p.tok.kind == tokSymbol && p.tok.text == symbol
}

func (p *pbParser) expect(symbol string) error {
	if !p.is(symbol) {
		return p.tok.pos.errorf("Expected %q, found %q.", symbol, p.tok.String())
	}
	return p.advance()
}

// message reads fields up to end ("" for the end of the input), leaving
// end for the caller to consume.
func (p *pbParser) message(typ *pbType, end string) (*pbMsg, error) {
	m := &pbMsg{typ: typ, fields: map[string][]pbValue{}}
	for {
		if p.tok.kind == tokEOF {
			if end == "" {
				return m, nil
			}
			return nil, p.tok.pos.errorf("Expected %q, found end of input.", end)
		}
		if end != "" && p.is(end) {
			return m, nil
		}
		if err := p.field(m); err != nil {
			return nil, err
		}
	}
}

func (p *pbParser) field(m *pbMsg) error {
	if p.is("[") {
		return p.tok.pos.errorf("Extension and Any fields ([...]) are not supported.")
	}
	if p.tok.kind != tokIdent {
		return p.tok.pos.errorf("Expected identifier, got: %s", p.tok)
	}
	name, pos := p.tok.text, p.tok.pos
	f := m.typ.field(name)
	if f == nil {
		return pos.errorf("Message type %q has no field named %q.", m.typ.name, name)
	}
	if f.refuse != "" {
		return pos.errorf("Field %q of %s is not supported by tfservingdouble: %s", name, m.typ.name, f.refuse)
	}
	if err := p.advance(); err != nil {
		return err
	}
	value := p.scalar
	if f.kind == pbMessage {
		value = p.messageValue
		if p.is(":") {
			if err := p.advance(); err != nil {
				return err
			}
		}
	} else if err := p.expect(":"); err != nil {
		return err
	}
	var values []pbValue
	if p.is("[") {
		if !f.repeated {
			return p.tok.pos.errorf("Field %q is not repeated and cannot take a [list].", name)
		}
		list, err := p.list(f, value)
		if err != nil {
			return err
		}
		values = list
	} else {
		v, err := value(f)
		if err != nil {
			return err
		}
		values = append(values, v)
	}
	if p.is(";") || p.is(",") {
		if err := p.advance(); err != nil {
			return err
		}
	}
	return m.add(f, pos, values)
}

// list reads a [list] of field f's values, each read by value.
func (p *pbParser) list(f *pbField, value func(*pbField) (pbValue, error)) ([]pbValue, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	var values []pbValue
	for !p.is("]") {
		v, err := value(f)
		if err != nil {
			return nil, err
		}
		values = append(values, v)
		if !p.is(",") {
			break
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	return values, p.expect("]")
}

func (p *pbParser) messageValue(f *pbField) (pbValue, error) {
	pos := p.tok.pos
	var end string
	switch {
	case p.is("{"):
		end = "}"
	case p.is("<"):
		end = ">"
	default:
		return pbValue{}, pos.errorf("Expected \"{\" to start field %q, found %q.", f.name, p.tok.String())
	}
	if p.depth++; p.depth > maxNesting {
		return pbValue{}, pos.errorf("Message nested too deeply.")
	}
	defer func() { p.depth-- }()
	if err := p.advance(); err != nil {
		return pbValue{}, err
	}
	sub, err := p.message(f.message, end)
	if err != nil {
		return pbValue{}, err
	}
	return pbValue{pos: pos, msg: sub}, p.advance()
}

func (p *pbParser) scalar(f *pbField) (pbValue, error) {
	pos := p.tok.pos
	switch f.kind {
	case pbString:
		if p.tok.kind != tokString {
			return pbValue{}, pos.errorf("Expected string for field %q, got: %s", f.name, p.tok)
		}
		var s strings.Builder
		for p.tok.kind == tokString {
			s.WriteString(p.tok.text)
			if err := p.advance(); err != nil {
				return pbValue{}, err
			}
		}
		if !utf8.ValidString(s.String()) {
			return pbValue{}, pos.errorf("String field %q contains invalid UTF-8 data.", f.name)
		}
		return pbValue{pos: pos, str: s.String()}, nil
	case pbBool:
		v := -1
		switch p.tok.text {
		case "true", "True", "t", "1":
			v = 1
		case "false", "False", "f", "0":
			v = 0
		}
		if v < 0 || p.tok.kind != tokIdent && p.tok.kind != tokInt {
			return pbValue{}, pos.errorf("Invalid value for boolean field %q. Value: %q.", f.name, p.tok.String())
		}
		return pbValue{pos: pos, num: int64(v)}, p.advance()
	case pbEnum:
		if p.tok.kind == tokIdent {
			for i, name := range f.enum {
				if name == p.tok.text {
					return pbValue{pos: pos, num: int64(i)}, p.advance()
				}
			}
			return pbValue{}, pos.errorf("Unknown enumeration value of %q for field %q.", p.tok.text, f.name)
		}
		n, err := p.integer(f, math.MinInt32, math.MaxInt32)
		return pbValue{pos: pos, num: n}, err
	case pbUint32:
		n, err := p.integer(f, 0, math.MaxUint32)
		return pbValue{pos: pos, num: n}, err
	default:
		n, err := p.integer(f, math.MinInt64, math.MaxInt64)
		return pbValue{pos: pos, num: n}, err
	}
}

func (p *pbParser) integer(f *pbField, min, max int64) (int64, error) {
	pos := p.tok.pos
	neg := p.is("-")
	if neg {
		if min == 0 {
			return 0, pos.errorf("Field %q is unsigned; it cannot be negative.", f.name)
		}
		if err := p.advance(); err != nil {
			return 0, err
		}
	}
	if p.tok.kind != tokInt {
		return 0, p.tok.pos.errorf("Expected integer for field %q, got: %s", f.name, p.tok)
	}
	text := p.tok.text
	base := 10
	switch {
	case len(text) > 1 && (text[1] == 'x' || text[1] == 'X'):
		base, text = 16, text[2:]
	case len(text) > 1 && text[0] == '0':
		base = 8
	}
	u, err := strconv.ParseUint(text, base, 64)
	limit := uint64(max)
	if neg {
		limit = uint64(-(min + 1)) + 1
	}
	if err != nil || u > limit {
		return 0, pos.errorf("Integer out of range for field %q: %s%s", f.name, map[bool]string{true: "-"}[neg], p.tok.text)
	}
	n := int64(u)
	if neg {
		n = -n // wraps to MinInt64 exactly when u is 1<<63
	}
	return n, p.advance()
}
