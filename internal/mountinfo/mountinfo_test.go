package mountinfo

import (
	"reflect"
	"testing"
)

func TestParseReadsEachMountAndSkipsWhatIsNotOne(t *testing.T) {
	table := "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n" +
		"35 31 0:32 /kubepods/pod1/c1 /sys/fs/cgroup/memory ro,relatime - cgroup cgroup rw,memory\n" +
		`40 22 0:40 / /tmp/with\040space rw master:2 unbindable - tmpfs tmp\134fs rw,size=1024k` + "\n" +
		"not a mount\n" +
		"41 22 0:41 / /no/separator rw tmpfs tmpfs rw\n"
	want := []Mount{
		{Root: "/", MountPoint: "/", FSType: "ext4", Source: "/dev/sda1", SuperOptions: []string{"rw"}},
		{Root: "/kubepods/pod1/c1", MountPoint: "/sys/fs/cgroup/memory", FSType: "cgroup", Source: "cgroup", SuperOptions: []string{"rw", "memory"}},
		{Root: "/", MountPoint: "/tmp/with space", FSType: "tmpfs", Source: `tmp\fs`, SuperOptions: []string{"rw", "size=1024k"}},
	}
	if got := Parse([]byte(table)); !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
	}
}

func TestReadFindsTheRootMount(t *testing.T) {
	mounts, err := Read()
	if err != nil {
		t.Skipf("no mount table here: %v", err)
	}
	for _, m := range mounts {
		if m.MountPoint == "/" {
			return
		}
	}
	t.Errorf("no mount at / among %d", len(mounts))
}
