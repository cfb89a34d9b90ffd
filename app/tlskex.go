package app

import (
	"crypto/tls"
	"strings"

	"github.com/rdmaprobe/rdmaprobe/certs"
	"github.com/urfave/cli/v2"
)

// DefaultTLSKex is the key exchange of every handshake unless --tls-kex
// says otherwise (certs.KexX25519 explains why it is not Go's hybrid).
const DefaultTLSKex = certs.KexX25519

func tlsKexFlag() cli.Flag {
	return &cli.StringFlag{Name: "tls-kex", Value: DefaultTLSKex,
		Usage: "TLS 1.3 key exchange: " + strings.Join(certs.KeyExchanges, ", ") +
			" (hybrid = X25519MLKEM768, post-quantum, ~25% more CPU per handshake)"}
}

// checkTLSKex validates --tls-kex before anything starts.
func checkTLSKex(c *cli.Context) error {
	return certs.SetKeyExchange(&tls.Config{}, c.String("tls-kex"))
}
