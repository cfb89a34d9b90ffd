// Package softroce runs rdmaprobe's verbs code inside a small QEMU guest
// whose kernel (Debian's own) provides Soft-RoCE: the vm backend, for
// hosts with no RDMA device.
//
// The host side builds an initramfs from installed Debian packages
// (BuildImage), boots it (Boot) and talks to the guest over a
// virtio-serial port with JSON lines (Guest.Call). The guest side is the
// app binary itself running as PID 1: it calls GuestMain when IsGuest
// reports true, which sets up rxe0 on lo and serves built-in ops (info,
// exec, exec-pair, sysctl, put-files, poweroff) plus the app's own through
// a Handler. A boot may also ask for rxe1 on a dummy netdev, where GID
// index 0 and rdma_cm work (netdev.go), for servers rdmaprobe did not
// write; programs and directories they need travel in the image
// (ImageConfig) or, when they exist only after boot, through PutFiles.
package softroce
