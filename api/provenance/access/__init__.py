"""Who may read and write which corpus: API keys' roles and grants (`clients`), the tables that hold them
(`store`), and telling who a request comes from (`identify`)."""
