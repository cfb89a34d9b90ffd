package fabric

// Access flags for RegMR (enum ibv_access_flags).
type Access int

const (
	AccessLocalWrite  Access = 1
	AccessRemoteWrite Access = 2
	AccessRemoteRead  Access = 4
)

// PD is a protection domain.
type PD interface {
	// RegMR allocates size bytes of memory the device may access and
	// registers them (ibv_reg_mr). The fabric owns the memory (C memory for
	// verbs, so no Go pointer is retained by C); Buf exposes it until Dereg.
	RegMR(size int, access Access) (MR, error)
	// CreateQP creates an RC or UD QP in RESET state (ibv_create_qp).
	CreateQP(attr QPInitAttr) (QP, error)
	// CreateAH creates an address handle towards a port (ibv_create_ah):
	// what a UD send names as its destination, with a QPN and Q_Key.
	CreateAH(attr AHAttr) (AH, error)
	// CreateSRQ creates a shared receive queue holding at least maxWR
	// receives of up to maxSGE entries each (ibv_create_srq). QPs created
	// with QPInitAttr.SRQ take their receive buffers from it.
	CreateSRQ(maxWR, maxSGE int) (SRQ, error)
	// Dealloc releases the PD (ibv_dealloc_pd); EBUSY while MRs, QPs or
	// SRQs still use it.
	Dealloc() error
}

// SRQ is a shared receive queue (struct ibv_srq). A SEND arriving at any
// QP attached to it consumes the oldest receive posted here; the
// completion goes to that QP's receive CQ with the QP's number in WC.QPN
// and the receive's wrID in WC.WRID.
type SRQ interface {
	// PostRecv posts one receive into mr.Buf()[off:off+length]
	// (ibv_post_srq_recv).
	PostRecv(wrID uint64, mr MR, off, length int) error
	// Destroy releases the SRQ (ibv_destroy_srq); EBUSY while a QP is
	// attached, so QPs go first.
	Destroy() error
}

// MR is a registered memory region.
type MR interface {
	Buf() []byte
	// Addr is the address a peer names to RDMA WRITE or READ Buf()[0]
	// (with RKey): the buffer's virtual address for verbs, a number of
	// the simulated device's own for sim.
	Addr() uint64
	LKey() uint32
	// RKey is 0 unless the MR was registered with remote access.
	RKey() uint32
	Dereg() error
}
