"""PostgreSQL test helpers: a throwaway `server`, a fresh `schema` per test, a movable `clock`."""
