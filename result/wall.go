package result

// wallErrnos are the errnos with which a resource says no: memory or map
// count (ENOMEM), a pool or ports (EAGAIN), file descriptors (EMFILE,
// ENFILE), space (ENOSPC).
var wallErrnos = map[string]bool{"ENOMEM": true, "EAGAIN": true, "EMFILE": true, "ENFILE": true, "ENOSPC": true}

// WallRefusal says whether a client that failed with this outcome class
// and errno was turned away by a resource: refused at capacity, or a
// resource's errno. The same limit turns away the same client at any
// load; a timeout or a TLS failure says only that the server was slow,
// which depends on everything else the point did. rxe answers EINVAL
// when an object pool is full (rxe_add_to_pool, 6.1), so EINVAL counts
// only when creating the client's resources.
func WallRefusal(class, errno string) bool {
	switch {
	case class == OutcomeRefused:
		return true
	case class == OutcomeTimeout:
		return false
	}
	return wallErrnos[errno] || class == OutcomeQPCreate && errno == "EINVAL"
}
