package webview

// Bounds the external tests derive their page sizes from.
const (
	MaxName      = maxName
	AtomsPerPage = atomsPerPage
)
