package ociimage

// Spec is what an image holds: its files and directories, all in one
// layer on an empty base, and how it runs, on linux.
type Spec struct {
	// Arch is the CPU architecture its binaries are for, as GOARCH names
	// it; empty means amd64.
	Arch  string
	Files []File
	// Dirs are directories that need a mode or owner of their own; the
	// parents of every file and directory are added as root-owned 0755.
	Dirs []Dir

	Entrypoint []string
	Cmd        []string
	// User is "uid[:gid]" or a name in the image's /etc/passwd.
	User       string
	Env        []string
	WorkingDir string
	Labels     map[string]string
}

// File is a regular file in the image.
type File struct {
	// Path is absolute and clean, e.g. /etc/passwd.
	Path string
	// Mode holds chmod bits (0o755, 0o4755); zero means 0o644.
	Mode int64
	// HostPath, when set, is read at Build time; otherwise Content is
	// the file (nil is an empty file).
	HostPath string
	Content  []byte
	UID, GID int
}

// Dir is a directory in the image.
type Dir struct {
	Path string
	// Mode holds chmod bits (0o700, 0o1777 for /tmp); zero means 0o755.
	Mode     int64
	UID, GID int
}

const (
	defaultFileMode = 0o644
	defaultDirMode  = 0o755
	// chmodBits is what a Mode may hold: permissions plus setuid, setgid
	// and sticky.
	chmodBits = 0o7777
)
