package intercept

// CorrelationKey is the argument FromHost removes from each tools/call
// (relay.KeyedInterceptor): the relay removes it itself from a long call it streams
// to the server, and gives interception the call whole once it has passed.
func (ic *Interceptor) CorrelationKey() string { return ic.key }
