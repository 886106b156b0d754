module github.com/bir-dev/bir-proxy

go 1.26.8

require (
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/tidwall/gjson v1.20.2
	github.com/tidwall/sjson v1.2.9
	golang.org/x/sys v0.50.0
)

require (
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.3.0 // indirect
)
