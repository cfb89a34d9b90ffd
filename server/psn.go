package server

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"sync"
)

// psnBits is the width of an RC packet sequence number.
const psnBits = 24

// feistelRounds: a balanced Feistel network on 12-bit halves needs more
// rounds than the 4 of the Luby-Rackoff bound for its outputs to look
// random to someone who sees many of them; AES per round keeps each
// round's function a PRF.
const feistelRounds = 10

// psnSource issues the server's PSNs with memory that does not grow with
// the clients served. Epoch by epoch, it runs a counter through a keyed
// permutation of the PSN space: within an epoch no PSN repeats, and
// their order is unpredictable without the key (drawn from crypto/rand).
// When the counter has gone round the whole space the source draws a new
// key and starts the next epoch. Throughout, a PSN held by a connected
// client is never issued again: a draw skips it.
type psnSource struct {
	bits int
	mu   sync.Mutex
	key  cipher.Block
	next uint32 // the counter: the next input of the permutation
	// epochs counts the keys used (1 once the first PSN is drawn).
	epochs int
	live   map[uint32]struct{}
}

func newPSNSource(bits int) *psnSource {
	if bits%2 != 0 || bits < 2 || bits > psnBits {
		panic(fmt.Sprintf("psn source: %d bits, want an even width up to %d", bits, psnBits))
	}
	return &psnSource{bits: bits, live: map[uint32]struct{}{}}
}

// draw returns a PSN held by no connected client, and marks it held
// until drop. It fails, never loops, when every PSN is held.
func (p *psnSource) draw() (uint32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	size := uint64(1) << p.bits
	if uint64(len(p.live)) >= size {
		return 0, fmt.Errorf("all %d PSNs are held by connected clients", size)
	}
	// At most len(live)+1 draws: each skipped value is held, and held
	// values are distinct, in this epoch and the next one alike.
	for {
		if p.key == nil || uint64(p.next) == size {
			if err := p.rekey(); err != nil {
				return 0, err
			}
		}
		psn := p.permute(p.next)
		p.next++
		if _, held := p.live[psn]; !held {
			p.live[psn] = struct{}{}
			return psn, nil
		}
	}
}

// drop releases psn: its client has left.
func (p *psnSource) drop(psn uint32) {
	p.mu.Lock()
	delete(p.live, psn)
	p.mu.Unlock()
}

// held counts the PSNs of connected clients, and epochs the keys used.
func (p *psnSource) stats() (held, epochs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live), p.epochs
}

func (p *psnSource) rekey() error {
	var k [16]byte
	if _, err := rand.Read(k[:]); err != nil {
		return err
	}
	b, err := aes.NewCipher(k[:])
	if err != nil {
		return err
	}
	p.key, p.next = b, 0
	p.epochs++
	return nil
}

// permute is a balanced Feistel network on the two halves of x: a
// bijection of [0, 2^bits) whatever the round function.
func (p *psnSource) permute(x uint32) uint32 {
	half := uint(p.bits / 2)
	mask := uint32(1)<<half - 1
	l, r := x>>half&mask, x&mask
	var in, out [16]byte
	for round := range feistelRounds {
		in[0] = byte(round)
		in[1], in[2], in[3], in[4] = byte(r>>24), byte(r>>16), byte(r>>8), byte(r)
		p.key.Encrypt(out[:], in[:])
		f := (uint32(out[0])<<24 | uint32(out[1])<<16 | uint32(out[2])<<8 | uint32(out[3])) & mask
		l, r = r, l^f
	}
	return l<<half | r
}
