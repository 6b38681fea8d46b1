"""Single sign-on settings, read from the environment (hitl/settings.py takes them all)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from hitl.env import envbool, envfloat, envint, envpairs, envstr

# Single sign-on through the company's OpenID Connect provider (mozilla-django-oidc;
# docs/sso.md). Off unless HITL_OIDC_ISSUER and HITL_OIDC_CLIENT_ID are set. Endpoints
# come from the issuer's discovery document unless set one by one.
HITL_OIDC_ISSUER = envstr("HITL_OIDC_ISSUER").rstrip("/")
HITL_OIDC_CLIENT_ID = envstr("HITL_OIDC_CLIENT_ID")
HITL_SSO = bool(HITL_OIDC_ISSUER and HITL_OIDC_CLIENT_ID)
HITL_OIDC_LABEL = envstr("HITL_OIDC_LABEL", "Sign in with single sign-on")
# The claim whose values (a list or one string) decide groups and permissions at every login.
HITL_OIDC_GROUPS_CLAIM = envstr("HITL_OIDC_GROUPS_CLAIM", "groups")
# "idp-value=django-group,...": a value may repeat to give several groups.
HITL_OIDC_GROUP_MAP = envpairs("HITL_OIDC_GROUP_MAP")
# "idp-value=hitl.review_all,...": the named permissions (app_label.codename).
HITL_OIDC_PERMISSION_MAP = envpairs("HITL_OIDC_PERMISSION_MAP")
for _value, _perm in HITL_OIDC_PERMISSION_MAP:
    if _perm.count(".") != 1:
        raise ImproperlyConfigured(
            f"HITL_OIDC_PERMISSION_MAP: {_perm!r} must be app_label.codename (hitl.review_all)"
        )
# The claim a new user's username comes from (made unique if taken).
HITL_OIDC_USERNAME_CLAIM = envstr("HITL_OIDC_USERNAME_CLAIM", "preferred_username")
# Off: the login page offers only SSO and every password login (admin's too) is refused.
HITL_PASSWORD_LOGIN = envbool("HITL_PASSWORD_LOGIN", True)
if not HITL_PASSWORD_LOGIN and not HITL_SSO:
    raise ImproperlyConfigured("HITL_PASSWORD_LOGIN=0 needs single sign-on (HITL_OIDC_ISSUER).")
if HITL_SSO:
    OIDC_RP_CLIENT_ID = HITL_OIDC_CLIENT_ID
    OIDC_RP_CLIENT_SECRET = envstr("HITL_OIDC_CLIENT_SECRET")
    if not OIDC_RP_CLIENT_SECRET:
        raise ImproperlyConfigured("single sign-on needs HITL_OIDC_CLIENT_SECRET")
    if urlsplit(HITL_OIDC_ISSUER).scheme not in ("https", "http"):
        raise ImproperlyConfigured(f"HITL_OIDC_ISSUER must be a URL, got {HITL_OIDC_ISSUER!r}")
    OIDC_RP_SCOPES = envstr("HITL_OIDC_SCOPES", "openid email profile groups")
    OIDC_RP_SIGN_ALGO = envstr("HITL_OIDC_SIGN_ALGO", "RS256")
    # Empty: taken from {issuer}/.well-known/openid-configuration on first use.
    OIDC_OP_AUTHORIZATION_ENDPOINT = envstr("HITL_OIDC_AUTHORIZATION_ENDPOINT")
    OIDC_OP_TOKEN_ENDPOINT = envstr("HITL_OIDC_TOKEN_ENDPOINT")
    OIDC_OP_USER_ENDPOINT = envstr("HITL_OIDC_USERINFO_ENDPOINT")
    OIDC_OP_JWKS_ENDPOINT = envstr("HITL_OIDC_JWKS_ENDPOINT")
    OIDC_USE_PKCE = True
    OIDC_TIMEOUT = envfloat("HITL_OIDC_TIMEOUT", 10.0)
    OIDC_AUTHENTICATION_CALLBACK_URL = "sso-callback"
    LOGIN_REDIRECT_URL_FAILURE = "/login/"
    # Logout also ends the session at the provider (RP-initiated logout): the ID token is
    # kept in the session as the logout request's hint.
    HITL_OIDC_LOGOUT_AT_IDP = envbool("HITL_OIDC_LOGOUT_AT_IDP", False)
    OIDC_STORE_ID_TOKEN = HITL_OIDC_LOGOUT_AT_IDP
    # Seconds of clock difference with the provider tolerated on exp/iat/nbf.
    HITL_OIDC_LEEWAY = envint("HITL_OIDC_LEEWAY", 60)
