// Package softroce runs rdmaprobe's verbs code inside a small QEMU guest
// whose kernel (Debian's own) provides Soft-RoCE: the vm backend, for
// hosts with no RDMA device.
//
// The host side builds an initramfs from installed Debian packages
// (BuildImage), boots it (Boot) and talks to the guest over a
// virtio-serial port with JSON lines (Guest.Call). The guest side is the
// app binary itself running as PID 1: it calls GuestMain when IsGuest
// reports true, which sets up rxe0 on lo and serves built-in ops (info,
// exec, exec-pair, sysctl, poweroff) plus the app's own through a Handler.
package softroce
